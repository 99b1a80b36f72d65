#!/usr/bin/env bash
# ZeRO stage 3 and its cross-node variants across emulated nodes (scripts/cluster.sh; root): a
# preset of examples/gpt-brown.json (`small` by default) on NODES nodes x RANKS ranks, fp32,
# micro-batch 8 sequences of the preset's block (`small` 256, `gpt2` 1024; `--set model.block_size=256`
# for shorter steps), links unshaped, 1 Gbit/s and 100 Mbit/s (tbf). Each variant runs at each link:
#   plain    stage 3
#   qwZ      zero_quantized_weights
#   qgZ      zero_quantized_gradients
#   hpZ      zero_hpz_partition_size = RANKS (only with RANKS > 1: a node's ranks form the group)
#   zero++   qwZ + qgZ (+ hpZ with RANKS > 1)
#   mics     mics_shard_size = RANKS (one node a shard group; with 1 rank a node, each node a
#            whole replica)
# Prints one table row per run: tokens/s (summary.json's mean over the steps after the first),
# cross-node bytes per step of rank 0's collectives (metrics.jsonl, mean over the steps after the first), the comm-wait
# share, the peak RSS of the largest rank and the mean training loss of the last 10 steps (rank 0's
# metrics.jsonl; the runs see the same batches, so a variant's loss is comparable with plain
# stage 3's at the same step count), with the machine and its load. Not a test.
#   scripts/bench_cluster.sh [--steps 15] [--nodes 2] [--ranks 1] [--preset small]
#       [--rate unshaped --rate 1gbit ...] [--variant plain --variant qwZ ...] [--set k=v]
# The loss budget of the quantized variants (300 steps, plain against ZeRO++ on 2 nodes x 2 ranks):
#   scripts/bench_cluster.sh --nodes 2 --ranks 2 --steps 300 --rate unshaped --variant plain \
#       --variant zero++
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/bench_common.sh

steps=15
nodes=2
ranks=1
preset=small
rates=()
variants=()
extra=()
while [ $# -gt 0 ]; do
  case $1 in
    --steps) steps=$2; shift 2 ;;
    --nodes) nodes=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --preset) preset=$2; shift 2 ;;
    --rate) rates+=("$2"); shift 2 ;;
    --variant) variants+=("$2"); shift 2 ;;
    --set) extra+=(--set "$2"); shift 2 ;;
    *) echo "bench_cluster.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
[ ${#rates[@]} -gt 0 ] || rates=(unshaped 1gbit 100mbit)
if [ ${#variants[@]} -eq 0 ]; then
  variants=(plain qwZ qgZ zero++ mics)
  [ "$ranks" -gt 1 ] && variants=(plain qwZ qgZ hpZ zero++ mics)
fi

# The `--set` arguments of a variant.
variant_settings() {
  local z=zero_optimization
  case $1 in
    plain) ;;
    qwZ) echo "--set $z.zero_quantized_weights=true" ;;
    qgZ) echo "--set $z.zero_quantized_gradients=true" ;;
    hpZ) echo "--set $z.zero_hpz_partition_size=$ranks" ;;
    zero++)
      echo "--set $z.zero_quantized_weights=true --set $z.zero_quantized_gradients=true"
      [ "$ranks" -gt 1 ] && echo "--set $z.zero_hpz_partition_size=$ranks" ;;
    mics) echo "--set $z.mics_shard_size=$ranks" ;;
    *) echo "bench_cluster.sh: unknown variant '$1'" >&2; exit 2 ;;
  esac
}

bench_brown_setup
bench_machine_line
echo "preset $preset, $nodes nodes x $ranks ranks, $steps steps, fp32, micro-batch 8${extra[*]:+, ${extra[*]}}"
json_number() { sed -n "s/^ *\"$2\": \\([-0-9.e+]*\\),\\?$/\\1/p" "$1" | head -1; }
# The mean of a metrics.jsonl field over the steps after the first.
metric_mean() {
  sed -n "s/.*\"$2\":\\([-0-9.e+]*\\).*/\\1/p" "$1" | tail -n +2 |
    awk '{ s += $1; n++ } END { if (n) printf "%.0f", s / n; else print "-" }'
}
# The mean of the loss of the last 10 steps in a metrics.jsonl.
last_losses_mean() {
  sed -n 's/.*"loss":\([-0-9.e+]*\).*/\1/p' "$1" | tail -n 10 |
    awk '{ s += $1; n++ } END { if (n) printf "%.4f", s / n; else print "-" }'
}
# The largest of summary.json's peak_rss_bytes, in MiB.
peak_rss_mib() {
  sed -n '/"peak_rss_bytes"/,/\]/p' "$1" | grep -o '[0-9]\+' |
    awk '$1 > m { m = $1 } END { printf "%.0f", m / 1048576 }'
}

echo "| variant | link | tokens/s | cross-node bytes/step (rank 0) | comm-wait share | peak RSS/rank (MiB) | loss, last 10 steps |"
echo "|---|---|---|---|---|---|---|"
for variant in "${variants[@]}"; do
  read -r -a settings <<<"$(variant_settings "$variant" | tr '\n' ' ')"
  for rate in "${rates[@]}"; do
    run_dir="$out_dir/$variant-$rate"
    shape=()
    [ "$rate" = unshaped ] || shape=(--rate "$rate")
    DEEPSHARD="$ds" MASTER_PORT=29511 scripts/cluster.sh run "$nodes" "$ranks" "${shape[@]}" -- \
      "$(pwd)/$ds" train --config examples/gpt-brown.json --set "model.preset=$preset" \
      --set zero_optimization.stage=3 --set train_micro_batch_size_per_gpu=8 \
      --set "train.steps=$steps" --set train.sample_tokens=0 --set train.eval_interval=0 \
      --set data.valid= --set train.log_interval=1000 --set "train.run_dir=$run_dir" \
      "${settings[@]}" "${extra[@]}" >"$out_dir/$variant-$rate.log" 2>&1 ||
      { echo "$variant at $rate failed:" >&2; tail -20 "$out_dir/$variant-$rate.log" >&2; exit 1; }
    printf '| %s | %s | %.0f | %.1f MB | %.1f %% | %s | %s |\n' "$variant" "$rate" \
      "$(json_number "$run_dir/summary.json" mean_tokens_per_s)" \
      "$(metric_mean "$run_dir/metrics.jsonl" comm_bytes_cross_node | awk '{ print $1 / 1e6 }')" \
      "$(json_number "$run_dir/summary.json" comm_wait_share | awk '{ print 100 * $1 }')" \
      "$(peak_rss_mib "$run_dir/summary.json")" "$(last_losses_mean "$run_dir/metrics.jsonl")"
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
