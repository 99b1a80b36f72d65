#!/usr/bin/env bash
# Checkpoint save/load benchmark (not a test): the `gpt2` preset (byte vocabulary, 85.8M
# parameters) at N = 2, ZeRO stage 1, fp32: one training step, then save_checkpoint (rank 0's
# wall clock from the call to the published tag, as the trainer logs it), then a fresh 2-rank job
# that only loads it (resume, no step). Compared with the disk's sequential write speed
# (`dd if=/dev/zero bs=1M count=1024 conv=fdatasync`) in the same directory. Each is repeated and
# the median reported. Usage: scripts/bench_checkpoint.sh [--repeat R] [--dir DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
repeat=3; dir="${TMPDIR:-/tmp}/deepshard-ckbench"
while [ $# -gt 0 ]; do
  case "$1" in
    --repeat) repeat="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    *) echo "usage: scripts/bench_checkpoint.sh [--repeat R] [--dir DIR]" >&2; exit 2 ;;
  esac
done
ds="$(pwd)/${BUILD_DIR:-build}/deepshard"
rm -rf "$dir"; mkdir -p "$dir"
trap 'rm -rf "$dir"' EXIT
"$ds" prepare-data tests/train/data/corpus.txt -o "$dir/c.bin" >/dev/null

median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
dd_rates=()
for i in $(seq "$repeat"); do
  # dd prints "... copied, S s, R MB/s" on its last line.
  s=$(dd if=/dev/zero of="$dir/dd.bin" bs=1M count=1024 conv=fdatasync 2>&1 | tail -1 |
      sed -E 's/.* copied, ([0-9.]+) s.*/\1/')
  dd_rates+=("$(awk -v s="$s" 'BEGIN {printf "%.0f", 1073.741824 / s}')")
  rm -f "$dir/dd.bin"
done

config() {  # $1 = checkpoint dir, $2 = save_interval, $3 = resume
  cat <<JSON
{"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
 "optimizer": {"type": "AdamW", "params": {"lr": 3e-4, "weight_decay": 0.1}},
 "zero_optimization": {"stage": 1},
 "model": {"preset": "gpt2"}, "data": {"train": "$dir/c.bin"},
 "train": {"steps": 1, "seed": 1, "run_dir": "$1.run", "checkpoint_dir": "$1",
           "save_interval": $2, "resume": "$3"},
 "comm": {"timeout_s": 900}}
JSON
}
save_rates=(); load_rates=(); save_s=(); load_s=()
for i in $(seq "$repeat"); do
  c="$dir/ckpt$i"
  config "$c" 1 "" > "$dir/save.json"
  out=$("$ds" launch -n 2 -- "$ds" train --config "$dir/save.json" 2>&1) ||
    { echo "$out" | tail -20 >&2; exit 1; }
  mb=$(du -sm --apparent-size "$c/step1" | cut -f1)
  s=$(echo "$out" | sed -nE 's/.*saved checkpoint .* in ([0-9.e+-]+) s .*/\1/p')
  save_s+=("$s"); save_rates+=("$(awk -v m="$mb" -v s="$s" 'BEGIN {printf "%.0f", m * 1.048576 / s}')")
  sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true  # cold read when allowed
  config "$c" 0 step1 > "$dir/load.json"
  out=$("$ds" launch -n 2 -- "$ds" train --config "$dir/load.json" 2>&1) ||
    { echo "$out" | tail -20 >&2; exit 1; }
  s=$(echo "$out" | sed -nE 's/.*resumed from .* in ([0-9.e+-]+) s.*/\1/p')
  load_s+=("$s"); load_rates+=("$(awk -v m="$mb" -v s="$s" 'BEGIN {printf "%.0f", m * 1.048576 / s}')")
  rm -rf "$c" "$c.run"
done
echo "checkpoint size: $mb MiB (2 shard files + manifest)"
echo "| what | median | runs |"
echo "|---|---|---|"
echo "| dd sequential write, 1 GiB, fdatasync | $(printf '%s\n' "${dd_rates[@]}" | median) MB/s | ${dd_rates[*]} MB/s |"
echo "| save_checkpoint, N = 2 | $(printf '%s\n' "${save_rates[@]}" | median) MB/s ($(printf '%s\n' "${save_s[@]}" | median) s) | ${save_s[*]} s |"
echo "| load_checkpoint, N = 2 | $(printf '%s\n' "${load_rates[@]}" | median) MB/s ($(printf '%s\n' "${load_s[@]}" | median) s) | ${load_s[*]} s |"
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
