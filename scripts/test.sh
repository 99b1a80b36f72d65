#!/usr/bin/env bash
# The whole test suite: installs and builds what is missing, runs every test with CTest (multi-rank
# tests start real rank processes), then the readers of untrusted input (JSON config, checkpoint,
# safetensors, token files: their tests and fuzz cases) under ASan+UBSan (scripts/sanitize.sh
# readers; docs/reliability.md, "Sanitizers"). Usage: scripts/test.sh [extra ctest args]; with
# ctest arguments (a subset: -R ...) the sanitizer step is skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build_dir="${BUILD_DIR:-build}"
(cd "$build_dir" && ctest --output-on-failure -j "${JOBS:-2}" "$@")
[ $# -gt 0 ] || scripts/sanitize.sh readers
