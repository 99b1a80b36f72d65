#!/usr/bin/env bash
# Sanitizer runs (scripts/test.sh, what CI runs, runs `all` after the suite, within a time budget):
# the unit tests (every binary of CTest label "unit", which includes the reader fuzz tests, and
# config_tests) built with AddressSanitizer + UndefinedBehaviorSanitizer in build-asan/, and the comm
# tests (real ranks) built with ThreadSanitizer in build-tsan/ (ranks and test process instrumented;
# the deepshard executable the tests start is the normal build's in both trees). libtorch and Gloo
# are not instrumented: ASan checks deepshard's own code (leak checking off: libtorch keeps global
# allocations), TSan sees only deepshard's threads' accesses: with ignore_noninstrumented_modules=1
# it also ignores the memory accesses of the libc calls (free/delete, writev, pthread_cond_destroy)
# that uninstrumented libtorch and Gloo make, whose synchronisation (atomic refcounts, Gloo's own
# hand-offs) it cannot see, but still tracks their mutexes and condition variables; no suppression
# file (docs/reliability.md, "Sanitizers").
# Usage: scripts/sanitize.sh [asan|readers|tsan|all] (default all). `readers`: ASan+UBSan on the
# readers of untrusted input only (util_tests, checkpoint_tests, fuzz_tests: the JSON config, the
# checkpoint manifest and shards, safetensors and token files).
# `all` runs, in this order: the cheap ASan binaries and the readers, the TSan pass, then the other
# ASan binaries, so that a bounded run covers the most per minute.
# Environment: JOBS (default: the number of cores), BUILD_DIR (the normal build, default build/),
# DS_SANITIZE_DEADLINE (seconds since the epoch; scripts/test.sh sets it from its time budget): a
# build or run that would end after it is stopped, and it and everything after it are reported as
# not run (a time bound, not a finding: the exit status stays 0 unless something ran and failed).
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:-all}"
jobs="${JOBS:-$(nproc)}"
normal="${BUILD_DIR:-build}"
launcher="$PWD/$normal/deepshard"
deadline="${DS_SANITIZE_DEADLINE:-}"

status=0
not_run=()       # what the deadline cut off
out_of_time=0

# bounded CMD...: runs CMD, stopped at the deadline (exit 124 then, and out_of_time is set).
bounded() {
  if [[ -z "$deadline" ]]; then "$@"; return; fi
  local left=$((deadline - $(date +%s)))
  if (( left <= 0 )); then out_of_time=1; return 124; fi
  local rc=0
  timeout -k 30 "$left" "$@" || rc=$?
  (( rc == 124 )) && out_of_time=1
  return $rc
}

configure() {  # dir flags [more cmake arguments]
  # -O1 as the sanitizers' documentation recommends (a fifth less compile time than -O2); -g1 keeps
  # file and line in reports.
  cmake -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
    -DCMAKE_CXX_FLAGS="$2 -fno-omit-frame-pointer" \
    -DCMAKE_EXE_LINKER_FLAGS="$2" -DDS_TEST_LAUNCHER="$launcher" "${@:3}" >/dev/null
}

normal_launcher() {  # the normal build's deepshard, which both instrumented trees' tests start
  [[ -f "$normal/build.ninja" ]] || cmake -S . -B "$normal" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  bounded ninja -C "$normal" -j "$jobs" deepshard
}

asan() {  # binaries...: build each in build-asan and run it as soon as it is built
  configure build-asan "-fsanitize=address,undefined -fno-sanitize-recover=undefined"
  local t rc
  for t in "$@"; do
    if (( out_of_time )); then not_run+=("$t (ASan+UBSan)"); continue; fi
    rc=0; bounded ninja -C build-asan -j "$jobs" "$t" || rc=$?
    if (( rc == 124 )); then not_run+=("$t (ASan+UBSan)"); continue; fi
    (( rc == 0 )) || { status=1; continue; }
    echo "== $t (ASan+UBSan)"
    rc=0
    ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      bounded "build-asan/tests/$t" --gtest_brief=1 || rc=$?
    if (( rc == 124 )); then not_run+=("$t (ASan+UBSan, stopped while running)"); continue; fi
    (( rc == 0 )) || status=1
  done
}

tsan() {
  if (( out_of_time )); then not_run+=("comm_tests (TSan)"); return; fi
  local tsan_start=$SECONDS rc=0
  configure build-tsan "-fsanitize=thread"
  bounded ninja -C build-tsan -j "$jobs" comm_tests ds_comm_worker ds_job_worker || rc=$?
  if (( rc == 124 )); then not_run+=("comm_tests (TSan)"); return; fi
  (( rc == 0 )) || { status=1; return; }
  echo "== comm_tests (TSan)"
  # Ranks report into their own files (the launcher shows only a rank's last lines): shown on failure.
  rm -f build-tsan/tsan-report.*
  rc=0
  TSAN_OPTIONS="ignore_noninstrumented_modules=1 halt_on_error=1 log_path=$PWD/build-tsan/tsan-report" \
    bounded build-tsan/tests/comm_tests --gtest_brief=1 || rc=$?
  if (( rc == 124 )); then not_run+=("comm_tests (TSan, stopped while running)"); return; fi
  (( rc == 0 )) || { status=1; cat build-tsan/tsan-report.* 2>/dev/null || true; }
  echo "== TSan: builds and runs took $((SECONDS - tsan_start)) s"
}

# Cheapest builds first within each group.
cheap=(util_tests io_tests offload_tests monitor_tests optim_tests kernels_tests checkpoint_tests)
rest=(fuzz_tests config_tests activation_tests zero_tests profiling_tests models_tests)
rc=0; normal_launcher || rc=$?
if (( rc == 124 )); then
  echo "== sanitizers: NOT RUN within the time budget (DS_SANITIZE_DEADLINE): $what (the budget ended before the normal build's deepshard, which their tests start)"
  exit 0
fi
(( rc == 0 )) || { echo "sanitize: the normal build's deepshard did not build" >&2; exit 1; }
case "$what" in
  readers) asan util_tests checkpoint_tests fuzz_tests ;;
  asan) asan "${cheap[@]}" "${rest[@]}" ;;
  tsan) tsan ;;
  all) asan "${cheap[@]}"; tsan; asan "${rest[@]}" ;;
  *) echo "sanitize: unknown pass $what (usage: scripts/sanitize.sh [asan|readers|tsan|all])" >&2
     exit 2 ;;
esac
echo "== sanitizers ($what): builds and runs took $SECONDS s"
if [[ ${#not_run[@]} -gt 0 ]]; then
  echo "== sanitizers: NOT RUN within the time budget (DS_SANITIZE_DEADLINE): ${not_run[*]}"
fi
exit $status
