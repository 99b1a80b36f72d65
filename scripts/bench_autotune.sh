#!/usr/bin/env bash
# Autotuning benchmark (not a test): tunes examples/gpt-brown.json at one model preset with
# `deepshard launch -n 2 --autotuning tune` within a memory budget per rank (docs/autotuning.md),
# then trains the example config as shipped and the tuner's run_optimal.json side by side for
# --steps steps each, --repeat times round-robin, and prints the tuning's experiments (ran, out of
# memory, pruned, failed), its wall time, the best configuration, and the tokens/s of both configs
# (median step time after 2 warm-up steps, median run) with their peak RSS.
# Usage: scripts/bench_autotune.sh [--preset small|gpt2] [--budget BYTES] [--repeat R]
#          [--steps S] [-- extra --set arguments for both, e.g. --set model.block_size=256]
set -euo pipefail
cd "$(dirname "$0")/.."
preset=small; budget=3e9; repeat=2; steps=12; extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --preset) preset="$2"; shift 2 ;;
    --budget) budget="$2"; shift 2 ;;
    --repeat) repeat="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
  esac
done
source scripts/bench_common.sh
bench_brown_setup
py=/usr/bin/python3
common=(--config examples/gpt-brown.json --set "model.preset=$preset" "${extra[@]}")

bench_machine_line
started=$(date +%s)
"$ds" launch -n 2 --autotuning tune --memory-budget "$budget" -- "$ds" train "${common[@]}" \
  --set autotuning.enabled=true --set "autotuning.results_dir=$out_dir/results" \
  --set "autotuning.exps_dir=$out_dir/exps" --set "train.run_dir=$out_dir/tuning" \
  >"$out_dir/tune.log" 2>&1 || { tail -20 "$out_dir/tune.log" >&2; exit 1; }
tuning_s=$(($(date +%s) - started))

# Both configs train the same steps without evaluation, samples or checkpoints.
run_sets=(--set "train.steps=$steps" --set train.eval_interval=0 --set train.sample_tokens=0
  --set data.valid= --set train.log_interval=1000 --set train.save_interval=0)
train_one() {  # name config... -> "tokens/s peak_rss_mib" of one run
  local name="$1"; shift
  "$ds" launch -n 2 -- "$ds" train "$@" "${run_sets[@]}" --set "train.run_dir=$out_dir/$name" \
    >"$out_dir/$name.log" 2>&1 || { tail -20 "$out_dir/$name.log" >&2; exit 1; }
  "$py" - "$out_dir/$name" <<'EOF'
import json, statistics, sys
run = sys.argv[1]
summary = json.load(open(run + "/summary.json"))
steps = [json.loads(l) for l in open(run + "/metrics.jsonl") if '"step_time_s"' in l]
# tokens_per_s of a step is its tokens over its step_time_s: the median step's rate
median = statistics.median(s["tokens_per_s"] for s in steps[2:])
print("%.1f %.0f" % (median, max(summary["peak_rss_bytes"]) / 2**20))
EOF
}
for i in $(seq 1 "$repeat"); do
  train_one "shipped-$i" "${common[@]}" >"$out_dir/shipped-$i.result"
  train_one "tuned-$i" --config "$out_dir/results/run_optimal.json" >"$out_dir/tuned-$i.result"
done
median_run() { cat "$out_dir/$1"-*.result | sort -g | sed -n "$(( (repeat + 1) / 2 ))p"; }
read -r shipped_tps shipped_rss <<<"$(median_run shipped)"
read -r tuned_tps tuned_rss <<<"$(median_run tuned)"

echo "preset $preset, budget $budget bytes per rank, 2 ranks; load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| experiment | status | micro-batch x accumulation | samples/s | peak RSS (MiB) | estimate (MiB) | wall (s) |"
echo "|---|---|---|---|---|---|---|"
"$py" - "$out_dir/results/results.jsonl" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    mib = lambda b: "%.0f" % (b / 2**20) if b else "-"
    print("| %s | %s | %s x %s | %s | %s | %s | %.0f |" % (
        r["name"], r["status"], r["train_micro_batch_size_per_gpu"], r["gradient_accumulation_steps"],
        "%.2f" % r["throughput"] if r["status"] == "ran" else "-", mib(r["peak_rss_bytes"]),
        mib(r["memory_estimate_bytes"]), r["wall_s"]))
EOF
echo
echo "tuning wall time: ${tuning_s} s; $(grep -o 'best: .*' "$out_dir/tune.log" | sed 's/; wrote.*//')"
echo "ds_config_optimal.json: $(tr -d ' \n' <"$out_dir/results/ds_config_optimal.json")"
echo
echo "| config | tokens/s (median of $repeat, $steps steps) | peak RSS (MiB) |"
echo "|---|---|---|"
echo "| examples/gpt-brown.json as shipped | $shipped_tps | $shipped_rss |"
echo "| the tuner's run_optimal.json | $tuned_tps ($(awk -v a="$tuned_tps" -v b="$shipped_tps" 'BEGIN {printf "%.2fx", a / b}')) | $tuned_rss |"
