#!/usr/bin/env bash
# The reader fuzz tests at length: DEEPSHARD_FUZZ_CASES cases per reader (default 100000) from
# seed DEEPSHARD_FUZZ_SEED (default: the time). BUILD_DIR: the build to use (default build; use
# build-asan from scripts/sanitize.sh to catch out-of-bounds reads).
set -euo pipefail
cd "$(dirname "$0")/.."
build="${BUILD_DIR:-build}"
ninja -C "$build" -j1 fuzz_tests
DEEPSHARD_FUZZ_CASES="${DEEPSHARD_FUZZ_CASES:-100000}" DEEPSHARD_FUZZ_SEED="${DEEPSHARD_FUZZ_SEED:-$(date +%s)}" \
  ASAN_OPTIONS=detect_leaks=0 "$build/tests/fuzz_tests"
