#!/usr/bin/env bash
# Offload benchmark (not a test): the `gpt2` preset (byte vocabulary, 85.8M parameters, block 128,
# 2 sequences per rank) at N = 2, ZeRO stage 3, fp32, on the repository's test corpus: tokens/s and
# peak RSS per rank without offload, with offload_optimizer nvme, with optimizer + parameters on
# NVMe, each of the latter with the sub-group pipeline off and on (pipeline_read/pipeline_write,
# 9 buffers). Swap files in --dir (a disk folder). Median of --repeat runs per case, round-robin.
# Usage: scripts/bench_offload.sh [--repeat R] [--steps S] [--dir DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
repeat=1; steps=6; dir="${TMPDIR:-/tmp}/deepshard-offload-bench"
while [ $# -gt 0 ]; do
  case "$1" in
    --repeat) repeat="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    *) echo "usage: scripts/bench_offload.sh [--repeat R] [--steps S] [--dir DIR]" >&2; exit 2 ;;
  esac
done
ds="$(pwd)/${BUILD_DIR:-build}/deepshard"
rm -rf "$dir"; mkdir -p "$dir/nvme"
trap 'rm -rf "$dir"' EXIT
"$ds" prepare-data tests/train/data/corpus.txt -o "$dir/c.bin" >/dev/null

opt='"offload_optimizer": {"device": "nvme", "nvme_path": "'"$dir/nvme"'"'
par='"offload_param": {"device": "nvme", "nvme_path": "'"$dir/nvme"'", "max_in_cpu": 0}'
pipe=', "pipeline_read": true, "pipeline_write": true, "buffer_count": 9'
zero_of() {
  case "$1" in
    none) echo '' ;;
    opt) echo ", $opt}" ;;
    opt-pipe) echo ", $opt$pipe}" ;;
    opt-par) echo ", $opt}, $par" ;;
    opt-par-pipe) echo ", $opt$pipe}, $par" ;;
  esac
}
cases=(none opt opt-pipe opt-par opt-par-pipe)
json_number() { sed -n "s/^ *\"$2\": \\([-0-9.e+]*\\),\\?$/\\1/p" "$1" | head -1; }
json_array() { tr -d '\n ' < "$1" | sed -n "s/.*\"$2\":\\[\\([0-9,]*\\)\\].*/\\1/p"; }

echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq "$repeat"); do
  for c in "${cases[@]}"; do
    cat >"$dir/$c.json" <<JSON
{"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1,
 "optimizer": {"type": "AdamW", "params": {"lr": 3e-4, "weight_decay": 0.1}},
 "zero_optimization": {"stage": 3, "sub_group_size": 10000000 $(zero_of "$c")},
 "model": {"preset": "gpt2", "block_size": 128}, "data": {"train": "$dir/c.bin"},
 "train": {"steps": $steps, "run_dir": "$dir/run-$c-$i", "log_interval": 1000, "sample_tokens": 0}}
JSON
    "$ds" launch -n 2 -- "$ds" train --config "$dir/$c.json" >"$dir/$c-$i.log" 2>&1 ||
      { echo "case $c failed:" >&2; tail -20 "$dir/$c-$i.log" >&2; exit 1; }
    s="$dir/run-$c-$i/summary.json"
    echo "$c $(json_number "$s" mean_tokens_per_s) $(json_array "$s" peak_rss_bytes)" >>"$dir/results"
  done
done
echo "| case | tokens/s (median) | peak RSS per rank, MiB (median run) |"
echo "|---|---|---|"
for c in "${cases[@]}"; do
  grep "^$c " "$dir/results" | sort -k2 -g | awk -v n="$repeat" 'NR == int((n + 1) / 2) {
    split($3, r, ","); m = ""; for (k in r) m = m (m == "" ? "" : " / ") sprintf("%.0f", r[k] / 1048576);
    printf "| %s | %.0f | %s |\n", $1, $2, m }'
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
