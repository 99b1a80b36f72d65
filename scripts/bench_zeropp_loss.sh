#!/usr/bin/env bash
# ZeRO++'s loss budget on a real model: `small` (examples/gpt-brown.json, fp32) trained STEPS steps
# at stage 3 on RANKS ranks of this host, once exact and once with ZeRO++'s quantized
# communication (zero_quantized_weights; add --gradients for zero_quantized_gradients too, or
# --gradients-only for zero_quantized_gradients alone), from the same seed. Prints each run's final loss (the mean of its last 10 steps), their ratio, and the
# machine and its load. Long (300 steps of `small` are about an hour per run on 2 cores). Not a
# test.
#   scripts/bench_zeropp_loss.sh [--steps 300] [--ranks 2] [--gradients | --gradients-only] [--set k=v]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench_common.sh

steps=300
ranks=2
quantized=(--set zero_optimization.zero_quantized_weights=true)
extra=()
while [ $# -gt 0 ]; do
  case $1 in
    --steps) steps=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --gradients) quantized+=(--set zero_optimization.zero_quantized_gradients=true); shift ;;
    --gradients-only) quantized=(--set zero_optimization.zero_quantized_gradients=true); shift ;;
    --set) extra+=(--set "$2"); shift 2 ;;
    *) echo "bench_zeropp_loss.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done

bench_brown_setup
bench_machine_line
# The mean loss of the last 10 records of a metrics.jsonl.
final_loss() {
  sed -n 's/.*"loss":\([-0-9.e+]*\).*/\1/p' "$1" | tail -n 10 |
    awk '{ s += $1; n++ } END { if (n) printf "%.4f", s / n; else print "-" }'
}

declare -A loss
for run in exact quantized; do
  run_dir="$out_dir/$run"
  settings=()
  [ "$run" = exact ] || settings=("${quantized[@]}")
  "$ds" launch -n "$ranks" -- "$(pwd)/$ds" train --config examples/gpt-brown.json \
    --set zero_optimization.stage=3 --set "train.steps=$steps" --set train.sample_tokens=0 \
    --set train.eval_interval=0 --set data.valid= --set train.log_interval=1000 \
    --set "train.run_dir=$run_dir" "${settings[@]}" "${extra[@]}" >"$out_dir/$run.log" 2>&1 ||
    { echo "the $run run failed:" >&2; tail -20 "$out_dir/$run.log" >&2; exit 1; }
  loss[$run]=$(final_loss "$run_dir/metrics.jsonl")
  echo "$run: final loss ${loss[$run]} (mean of the last 10 of $steps steps, $ranks ranks)"
done
awk -v q="${loss[quantized]}" -v e="${loss[exact]}" \
  'BEGIN { printf "quantized / exact final loss: %.4f (%+.2f %%; goal within 2 %%)\n", q / e, 100 * (q / e - 1) }'
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
