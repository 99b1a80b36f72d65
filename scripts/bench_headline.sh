#!/usr/bin/env bash
# The ZeRO-Infinity headline (issue #12; not a test): a GPT whose fp32 model states exceed this
# machine's RAM (n_layer 32, n_embd 2304, byte vocabulary: 2.04e9 parameters, 32.6 GB of fp32
# parameters, gradients and Adam moments against 23 GiB of RAM) trains --steps steps (default 2) at
# N = 2 with ZeRO stage 3, offload_optimizer and offload_param on NVMe (swap files in --dir), one
# sequence of 128 tokens per rank. Prints `deepshard estimate` without offload (does not fit) and
# with it, then per step: time, loss, peak RSS per rank, and the ledger's split by place.
# Usage: scripts/bench_headline.sh [--steps S] [--dir DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=2; dir="${TMPDIR:-/tmp}/deepshard-headline"
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    *) echo "usage: see the head of scripts/bench_headline.sh" >&2; exit 2 ;;
  esac
done
ds="$(pwd)/${BUILD_DIR:-build}/deepshard"
rm -rf "$dir"; mkdir -p "$dir/nvme"
trap 'rm -rf "$dir"' EXIT
"$ds" prepare-data tests/train/data/corpus.txt -o "$dir/c.bin" >/dev/null
source scripts/bench_common.sh
bench_machine_line
echo "RAM: $(free -g | awk '/^Mem:/ {print $2}') GiB; swap dir $dir ($(df -h "$dir" | awk 'NR==2 {print $4}') free)"
echo
echo "== stage 3 without offload:"
"$ds" estimate --params 2.04e9 --ranks 2 --stage 3 --dtype fp32
echo
echo "== stage 3, optimizer and parameters on NVMe:"
"$ds" estimate --params 2.04e9 --ranks 2 --stage 3 --dtype fp32 --offload nvme \
  --offload-param nvme --sub-group-size 1e7 --largest-layer 6.37e7
cat >"$dir/headline.json" <<JSON
{"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
 "optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "weight_decay": 0.1}},
 "zero_optimization": {"stage": 3, "sub_group_size": 10000000,
   "stage3_param_persistence_threshold": 0,
   "offload_optimizer": {"device": "nvme", "nvme_path": "$dir/nvme"},
   "offload_param": {"device": "nvme", "nvme_path": "$dir/nvme", "max_in_cpu": 0}},
 "model": {"preset": "gpt2", "n_layer": 32, "n_embd": 2304, "n_head": 18, "block_size": 128},
 "data": {"train": "$dir/c.bin"},
 "train": {"steps": $steps, "run_dir": "$dir/run", "log_interval": 1, "sample_tokens": 0}}
JSON
echo
start=$(date +%s)
"$ds" launch -n 2 -- "$ds" train --config "$dir/headline.json" 2>&1 | tee "$dir/train.log" |
  grep -E "parameters;|step [0-9]+/|error" || true
[ -f "$dir/run/summary.json" ] || { echo "the run failed:" >&2; tail -30 "$dir/train.log" >&2; exit 1; }
echo "wall time including start-up (zero.Init, swap-out): $(( $(date +%s) - start )) s"
echo
echo "| step | step time s | loss | RSS rank 0 MiB |"
echo "|---|---|---|---|"
sed 's/.*"loss":\([-0-9.e+]*\).*"rss_bytes":\([0-9]*\).*"step":\([0-9]*\).*"step_time_s":\([0-9.e+]*\).*/\3 \4 \1 \2/' \
  "$dir/run/metrics.jsonl" | awk '{printf "| %s | %.1f | %.4f | %.0f |\n", $1, $2, $3, $4 / 1048576}'
tr -d '\n ' <"$dir/run/summary.json" | sed -n 's/.*"peak_rss_bytes":\[\([0-9,]*\)\].*/\1/p' |
  awk -F, '{printf "peak RSS per rank: %.0f / %.0f MiB\n", $1 / 1048576, $2 / 1048576}'
du -sh "$dir/nvme" | awk '{print "swap files at the end: " $1}'
