# Sourced by the benchmark scripts (not run alone): the set-up they share.
# bench_brown_setup: `ds` = the deepshard binary (built by scripts/setup.sh when missing), the
# Brown corpus fetched into data/, `out_dir` = a fresh temporary directory removed at exit.
bench_brown_setup() {
  local build_dir="${BUILD_DIR:-build}"
  ds="$build_dir/deepshard"
  [ -x "$ds" ] || { scripts/setup.sh >/dev/null; }
  DEEPSHARD="$ds" scripts/fetch_brown.sh data >/dev/null
  out_dir="$(mktemp -d)"
  trap 'rm -rf "$out_dir"' EXIT
}

# One line naming the machine for the results: CPU model, cores, load average, date (UTC).
bench_machine_line() {
  echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores," \
    "load before: $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%F)"
}
