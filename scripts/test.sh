#!/usr/bin/env bash
# The whole test suite: installs and builds what is missing, runs every test with CTest (multi-rank
# tests start real rank processes), then the sanitizer passes (scripts/sanitize.sh all;
# docs/reliability.md, "Sanitizers"): every unit-test binary (the readers' fuzz cases included) and
# config_tests under ASan+UBSan, the comm tests (real ranks) under TSan. Usage: scripts/test.sh
# [--isa avx512|avx2|scalar] [extra ctest args]; with ctest arguments (a subset: -R ...) the
# sanitizer passes are skipped.
#
# --isa LEVEL runs everything on one CPU path, as on a CPU whose best level it is
# (scripts/isa_env.sh: deepshard's kernels, OpenBLAS's core, libtorch's and oneDNN's kernels, bf16
# computed in fp32 below avx512). A level the CPU lacks is refused by every test binary and
# deepshard process.
#
# Time budget: the whole command is meant to end within DS_TEST_BUDGET_MINUTES (default 75, inside
# CI's 90). Set-up, the build and the suite always run whole; the sanitizer passes stop at the
# budget and name what they did not run (all of them fit even from a cold start: README, "Two
# commands").
set -euo pipefail
cd "$(dirname "$0")/.."
budget_end=$(($(date +%s) + ${DS_TEST_BUDGET_MINUTES:-75} * 60))
if [ "${1:-}" = "--isa" ]; then
  # shellcheck source=scripts/isa_env.sh
  source scripts/isa_env.sh
  force_isa "${2:-}"
  shift 2
  echo "scripts/test.sh: $isa_line" >&2
fi
scripts/setup.sh
build_dir="${BUILD_DIR:-build}"
# A build tree that has not run the suite yet gets the tests' measured costs (seconds, one line a
# test: tests/ctest_costs.txt), so that CTest starts the longest ones first instead of finding them
# at the end; later runs use the costs CTest records itself.
costs="$build_dir/Testing/Temporary/CTestCostData.txt"
if [ ! -f "$costs" ]; then
  mkdir -p "$(dirname "$costs")"
  cp tests/ctest_costs.txt "$costs"
fi
# One test more than cores: the tests that wait on shaped links, timeouts and dead ranks leave
# cores idle (at -j2 the suite kept 1.6 of 2 cores busy, at -j3 1.9: docs/reliability.md).
(cd "$build_dir" && ctest --output-on-failure -j "${JOBS:-$(($(nproc) + 1))}" "$@")
[ $# -gt 0 ] || DS_SANITIZE_DEADLINE="${DS_SANITIZE_DEADLINE:-$budget_end}" scripts/sanitize.sh all
