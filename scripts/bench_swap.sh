#!/usr/bin/env bash
# Swap throughput benchmark (not a test): deepshard's io layer (build/bench/swap_throughput: libaio,
# O_DIRECT, DeepSpeed's aio defaults: 1 MiB blocks, queue depth 8, one thread) writing and reading
# GiB of swap files against the disk's own O_DIRECT bandwidth on the same path: fio (libaio and
# io_uring engines, 1 MiB blocks, iodepth 8, direct=1) and dd (oflag=direct / iflag=direct, 1 MiB).
# Best of --repeat for each. Also the libaio vs io_uring comparison that chose the backend
# (docs/offload.md). Usage: scripts/bench_swap.sh [--dir DIR] [--gib G] [--repeat R]
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${TMPDIR:-/tmp}/deepshard-swapbench"; gib=1; repeat=3
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir="$2"; shift 2 ;;
    --gib) gib="$2"; shift 2 ;;
    --repeat) repeat="$2"; shift 2 ;;
    *) echo "usage: scripts/bench_swap.sh [--dir DIR] [--gib G] [--repeat R]" >&2; exit 2 ;;
  esac
done
command -v fio >/dev/null || { echo "bench_swap: needs fio (apt-get install fio)" >&2; exit 1; }
bench="${BUILD_DIR:-build}/bench/swap_throughput"
[ -x "$bench" ] || { echo "bench_swap: build $bench first (ninja -C build swap_throughput)" >&2; exit 1; }
mkdir -p "$dir"
trap 'rm -rf "$dir/fio.dat" "$dir/dd.dat"' EXIT
mib=$(awk -v g="$gib" 'BEGIN {printf "%d", g * 1024}')
best() { sort -g | tail -1; }

echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg); path $dir ($(df -T "$dir" | awk 'NR==2 {print $2}'))"
for engine in libaio io_uring; do
  for rw in write read; do
    for i in $(seq "$repeat"); do
      fio --name=swap --filename="$dir/fio.dat" --size="${mib}M" --bs=1M --iodepth=8 --direct=1 \
          --rw="$rw" --ioengine="$engine" --output-format=terse --terse-version=3 2>/dev/null |
        awk -F';' -v rw="$rw" '{print (rw == "read" ? $7 : $48) / 1024}'
    done | best | xargs printf "fio %-8s %-5s %8.0f MiB/s\n" "$engine" "$rw"
  done
done
for i in $(seq "$repeat"); do
  dd if=/dev/zero of="$dir/dd.dat" bs=1M count="$mib" oflag=direct 2>&1 | tail -1 |
    sed -E 's/.* copied, ([0-9.]+) s.*/\1/' | awk -v m="$mib" '{print m / $1}'
done | best | xargs printf "dd oflag=direct   write %8.0f MiB/s\n"
for i in $(seq "$repeat"); do
  dd if="$dir/dd.dat" of=/dev/null bs=1M iflag=direct 2>&1 | tail -1 |
    sed -E 's/.* copied, ([0-9.]+) s.*/\1/' | awk -v m="$mib" '{print m / $1}'
done | best | xargs printf "dd iflag=direct   read  %8.0f MiB/s\n"
rm -f "$dir/dd.dat" "$dir/fio.dat"
"$bench" --dir "$dir" --gib "$gib" --repeat "$repeat"
"$bench" --dir "$dir" --gib "$gib" --repeat "$repeat" --threads 2
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
