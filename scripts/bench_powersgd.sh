#!/usr/bin/env bash
# PowerSGD benchmark (not a test; issue #16): the `small` preset on the Brown corpus, N = 2 ranks,
# ZeRO stage 0, fp32, --steps steps (default 300) uncompressed and with PowerSGD (rank --rank,
# compressing from step --start): final loss (mean of the last 10 steps), its gap to the
# uncompressed run, comm bytes of the last step (comm log), tokens/s. --wire adds two
# uncompressed runs with communication_data_type fp16 and bf16 (16-bit wire formats), compared
# with the fp32 wire the same way.
# Usage: scripts/bench_powersgd.sh [--steps S] [--rank R] [--start K] [--wire]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=300; rank=4; start=100; wire=0
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) steps="$2"; shift 2 ;;
    --rank) rank="$2"; shift 2 ;;
    --start) start="$2"; shift 2 ;;
    --wire) wire=1; shift ;;
    *) echo "usage: see the head of scripts/bench_powersgd.sh" >&2; exit 2 ;;
  esac
done
source scripts/bench_common.sh
bench_brown_setup

# run NAME [--set ...]: trains into $out_dir/NAME
run() {
  local name="$1"; shift
  "$ds" launch -n 2 -- "$ds" train --config examples/gpt-brown.json \
    --set model.preset=small --set "train.steps=$steps" --set train.sample_tokens=0 \
    --set train.eval_interval=0 --set train.log_interval=1000 --set zero_optimization.stage=0 \
    --set "train.run_dir=$out_dir/$name" "$@" >"$out_dir/$name.log" 2>&1 ||
    { echo "run $name failed:" >&2; tail -20 "$out_dir/$name.log" >&2; exit 1; }
}
# final_loss DIR, last_bytes DIR, tokens_per_s DIR
final_loss() { tail -10 "$1/metrics.jsonl" | sed 's/.*"loss": *\([-0-9.e+]*\).*/\1/' |
  awk '{s += $1} END {printf "%.4f", s / NR}'; }
last_bytes() { tail -1 "$1/metrics.jsonl" | sed 's/.*"comm_bytes": *\([0-9.e+]*\).*/\1/'; }
tokens_per_s() { sed -n 's/^ *"mean_tokens_per_s": \([0-9.e+]*\),\?$/\1/p' "$1/summary.json" | awk '{printf "%.0f", $1}'; }

bench_machine_line
run plain --set communication_data_type=fp32
run powersgd --set communication_data_type=fp32 \
  --set "compression={\"type\": \"powerSGD\", \"params\": {\"matrix_approximation_rank\": $rank, \"start_compressing_after_step\": $start}}"
if [ "$wire" = 1 ]; then
  run wire_fp16 --set communication_data_type=fp16
  run wire_bf16 --set communication_data_type=bf16
fi
p_loss=$(final_loss "$out_dir/plain"); p_bytes=$(last_bytes "$out_dir/plain")
# row LABEL NAME: one run against the uncompressed fp32-wire run
row() {
  awk -v label="$1" -v pl="$p_loss" -v cl="$(final_loss "$out_dir/$2")" -v pb="$p_bytes" \
    -v cb="$(last_bytes "$out_dir/$2")" -v tps="$(tokens_per_s "$out_dir/$2")" \
    'BEGIN {printf "| %s | %s | %+.2f %% | %s | 1/%.1f | %s |\n", label, cl, 100 * (cl - pl) / pl,
            cb, pb / cb, tps}'
}
echo
echo "| run | final loss (last 10) | gap | comm bytes, last step | bytes ratio | tokens/s |"
echo "|---|---|---|---|---|---|"
echo "| uncompressed, fp32 wire | $p_loss | | $p_bytes | 1 | $(tokens_per_s "$out_dir/plain") |"
row "PowerSGD rank $rank" powersgd
if [ "$wire" = 1 ]; then
  row "uncompressed, fp16 wire" wire_fp16
  row "uncompressed, bf16 wire" wire_bf16
fi
