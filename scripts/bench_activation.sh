#!/usr/bin/env bash
# Activation checkpointing benchmark (not a test): the gpt2 preset at block 1024 on the Brown
# corpus, N = 2 ranks, ZeRO stages 0 and 3, with and without train.activation_checkpointing, one
# sequence per rank: tokens/s (mean over the steps after the first), step time with/without, peak
# RSS per rank and the activation bytes kept at the peak (the meter, rank 0). Then, at stage 3, the
# largest micro-batch whose peak RSS per rank stays within --budget (bytes), with and without,
# measured by trying micro-batches 1, 2, ... (one step each; with checkpointing from --ckpt-from,
# every smaller one fitting too since the peak grows with the micro-batch), and the estimator's
# prediction beside it. --budget-only skips the first part.
# Usage: scripts/bench_activation.sh [--steps S] [--budget BYTES] [--max-micro M] [--ckpt-from M]
#                                    [--no-budget | --budget-only]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=4; budget=3221225472; max_micro=12; do_budget=1; do_table=1; ckpt_from=1
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps="$2"; shift 2 ;;
    --budget) budget="$2"; shift 2 ;;
    --max-micro) max_micro="$2"; shift 2 ;;
    --no-budget) do_budget=0; shift ;;
    --budget-only) do_table=0; shift ;;
    --ckpt-from) ckpt_from="$2"; shift 2 ;;
    *) echo "usage: see the head of scripts/bench_activation.sh" >&2; exit 2 ;;
  esac
done
source scripts/bench_common.sh
bench_brown_setup

json_number() { sed -n "s/^ *\"$2\": \\([-0-9.e+]*\\),\\?$/\\1/p" "$1" | head -1; }
json_array() { tr -d '\n ' < "$1" | sed -n "s/.*\"$2\":\\[\\([0-9,]*\\)\\].*/\\1/p"; }

# run NAME STAGE CKPT MICRO STEPS -> run dir $out_dir/NAME (exit status of the run)
run() {
  local name="$1" stage="$2" ckpt="$3" micro="$4" n="$5"
  "$ds" launch -n 2 -- "$ds" train --config examples/gpt-brown.json \
    --set model.preset=gpt2 --set model.block_size=1024 --set "train.steps=$n" \
    --set train.sample_tokens=0 --set train.eval_interval=0 --set data.valid= \
    --set train.log_interval=1000 --set "train_micro_batch_size_per_gpu=$micro" \
    --set "zero_optimization.stage=$stage" --set "train.activation_checkpointing=$ckpt" \
    --set "train.run_dir=$out_dir/$name" >"$out_dir/$name.log" 2>&1
}
max_rss() { json_array "$1/summary.json" peak_rss_bytes | tr ',' '\n' | sort -n | tail -1; }

echo "machine: $(nproc) cores, load before: $(cut -d' ' -f1-3 /proc/loadavg)"
if [ "$do_table" = 1 ]; then
echo
echo "| stage | checkpointing | tokens/s | step time s | peak RSS/rank MiB | activations kept MiB (rank 0) |"
echo "|---|---|---|---|---|---|"
declare -A step_time
for stage in 0 3; do
  for ckpt in false true; do
    name="s$stage-$ckpt"
    run "$name" "$stage" "$ckpt" 1 "$steps" ||
      { echo "run $name failed:" >&2; tail -20 "$out_dir/$name.log" >&2; exit 1; }
    tps=$(json_number "$out_dir/$name/summary.json" mean_tokens_per_s)
    st=$(awk -v t="$tps" 'BEGIN{printf "%.2f", 2048/t}')
    step_time[$name]=$st
    printf '| %s | %s | %.0f | %s | %.0f | %.0f |\n' "$stage" "$ckpt" "$tps" "$st" \
      "$(awk -v r="$(max_rss "$out_dir/$name")" 'BEGIN{print r/1048576}')" \
      "$(awk -v a="$(json_number "$out_dir/$name/summary.json" activations_kept)" 'BEGIN{print a/1048576}')"
  done
done
for stage in 0 3; do
  echo "stage $stage: step time with / without checkpointing: $(awk -v a="${step_time[s$stage-true]}" -v b="${step_time[s$stage-false]}" 'BEGIN{printf "%.2fx", a/b}')"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
fi
[ "$do_budget" = 1 ] || exit 0

echo
echo "largest micro-batch at stage 3 with peak RSS per rank <= $budget bytes (1 step per try):"
for ckpt in false true; do
  first=1
  [ "$ckpt" = true ] && first="$ckpt_from"
  fits=$((first - 1))
  for micro in $(seq "$first" "$max_micro"); do
    name="budget-$ckpt-$micro"
    run "$name" 3 "$ckpt" "$micro" 1 || { echo "  micro-batch $micro: run failed" >&2; break; }
    rss=$(max_rss "$out_dir/$name")
    echo "  checkpointing $ckpt, micro-batch $micro: peak RSS/rank $((rss / 1048576)) MiB"
    [ "$rss" -le "$budget" ] || break
    fits=$micro
  done
  echo "  => checkpointing $ckpt: largest micro-batch $fits"
done
echo "estimate (model states + activations kept; RSS adds the allocator's and libraries' share):"
"$ds" estimate --model gpt2 --ranks 2 --stage 3 --dtype fp32 --budget "$budget" | tail -3
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
