#!/usr/bin/env bash
# ZeRO stage 3 across emulated nodes (scripts/cluster.sh; root): `small` (examples/gpt-brown.json)
# on NODES nodes x 1 rank, fp32, micro-batch 8, links unshaped, 1 Gbit/s and 100 Mbit/s (tbf).
# Prints tokens/s (summary.json's mean over the steps after the first), cross-node bytes per step
# and the comm-wait share, with the machine and its load. Not a test.
#   scripts/bench_cluster.sh [--steps 15] [--nodes 2] [--rate unshaped --rate 1gbit ...] [--set k=v]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench_common.sh

steps=15
nodes=2
rates=()
extra=()
while [ $# -gt 0 ]; do
  case $1 in
    --steps) steps=$2; shift 2 ;;
    --nodes) nodes=$2; shift 2 ;;
    --rate) rates+=("$2"); shift 2 ;;
    --set) extra+=(--set "$2"); shift 2 ;;
    *) echo "bench_cluster.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
[ ${#rates[@]} -gt 0 ] || rates=(unshaped 1gbit 100mbit)

bench_brown_setup
bench_machine_line
json_number() { sed -n "s/^ *\"$2\": \\([-0-9.e+]*\\),\\?$/\\1/p" "$1" | head -1; }
# The mean of a metrics.jsonl field over the steps after the first.
metric_mean() {
  sed -n "s/.*\"$2\":\\([-0-9.e+]*\\).*/\\1/p" "$1" | tail -n +2 |
    awk '{ s += $1; n++ } END { if (n) printf "%.0f", s / n; else print "-" }'
}

echo "| link | tokens/s | cross-node bytes/step | comm-wait share |"
echo "|---|---|---|---|"
for rate in "${rates[@]}"; do
  run_dir="$out_dir/$rate"
  shape=()
  [ "$rate" = unshaped ] || shape=(--rate "$rate")
  DEEPSHARD="$ds" MASTER_PORT=29511 scripts/cluster.sh run "$nodes" 1 "${shape[@]}" -- \
    "$(pwd)/$ds" train --config examples/gpt-brown.json --set zero_optimization.stage=3 \
    --set train_micro_batch_size_per_gpu=8 --set "train.steps=$steps" --set train.sample_tokens=0 \
    --set train.eval_interval=0 --set data.valid= --set train.log_interval=1000 \
    --set "train.run_dir=$run_dir" "${extra[@]}" >"$out_dir/$rate.log" 2>&1 ||
    { echo "run at $rate failed:" >&2; tail -20 "$out_dir/$rate.log" >&2; exit 1; }
  echo "| $rate | $(json_number "$run_dir/summary.json" mean_tokens_per_s) |" \
    "$(metric_mean "$run_dir/metrics.jsonl" comm_bytes_cross_node) |" \
    "$(json_number "$run_dir/summary.json" comm_wait_share) |"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
