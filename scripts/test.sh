#!/usr/bin/env bash
# The whole test suite: installs and builds what is missing, runs every test with CTest (multi-rank
# tests start real rank processes), then the sanitizer passes (scripts/sanitize.sh all;
# docs/reliability.md, "Sanitizers"): every unit-test binary (the readers' fuzz cases included) and
# config_tests under ASan+UBSan, the comm tests (real ranks) under TSan. Usage: scripts/test.sh
# [extra ctest args]; with ctest arguments (a subset: -R ...) the sanitizer passes are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build_dir="${BUILD_DIR:-build}"
(cd "$build_dir" && ctest --output-on-failure -j "${JOBS:-2}" "$@")
[ $# -gt 0 ] || scripts/sanitize.sh all
