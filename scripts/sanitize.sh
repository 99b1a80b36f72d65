#!/usr/bin/env bash
# Sanitizer runs (scripts/test.sh, what CI runs, runs `all` after the suite): the unit tests
# (every binary of CTest label "unit", which includes the reader fuzz tests, and config_tests) built
# with AddressSanitizer + UndefinedBehaviorSanitizer in build-asan/, and the comm tests (real ranks)
# built with ThreadSanitizer in build-tsan/ (ranks and test process instrumented, the launcher the
# normal build's). libtorch and Gloo are
# not instrumented: ASan checks deepshard's own code (leak checking off: libtorch keeps global
# allocations), TSan sees only deepshard's threads' accesses: with ignore_noninstrumented_modules=1
# it also ignores the memory accesses of the libc calls (free/delete, writev, pthread_cond_destroy)
# that uninstrumented libtorch and Gloo make, whose synchronisation (atomic refcounts, Gloo's own
# hand-offs) it cannot see, but still tracks their mutexes and condition variables; no suppression
# file (docs/reliability.md, "Sanitizers").
# Usage: scripts/sanitize.sh [asan|readers|tsan|all] (default all). `readers`: ASan+UBSan on the
# readers of untrusted input only (util_tests, checkpoint_tests, fuzz_tests: the JSON config, the
# checkpoint manifest and shards, safetensors and token files), the binaries that need no
# executable beside them, so no instrumented deepshard is built (a fraction of `asan`'s build).
# Environment: JOBS (default: the number of cores), BUILD_DIR (the normal build, default build/).
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:-all}"
jobs="${JOBS:-$(nproc)}"

configure() {  # dir flags [more cmake arguments]
  cmake -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS="$2 -fno-omit-frame-pointer" \
    -DCMAKE_EXE_LINKER_FLAGS="$2" "${@:3}" >/dev/null
}

status=0
if [[ "$what" == asan || "$what" == readers || "$what" == all ]]; then
  configure build-asan "-fsanitize=address,undefined -fno-sanitize-recover=undefined"
  # Cheapest builds first; config_tests last (it needs the instrumented deepshard: the whole tree).
  unit=(util_tests monitor_tests io_tests offload_tests optim_tests kernels_tests checkpoint_tests
        fuzz_tests activation_tests zero_tests models_tests profiling_tests config_tests)
  [[ "$what" == readers ]] && unit=(util_tests checkpoint_tests fuzz_tests)
  for t in "${unit[@]}"; do  # each binary runs as soon as it is built: findings come early
    ninja -C build-asan -j "$jobs" "$t"
    echo "== $t (ASan+UBSan)"
    ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      "build-asan/tests/$t" --gtest_brief=1 || status=1
  done
  echo "== ASan+UBSan ($what): builds and runs took $SECONDS s"
fi
if [[ "$what" == tsan || "$what" == all ]]; then
  tsan_start=$SECONDS
  # The ranks (ds_comm_worker, ds_job_worker) and the test process are instrumented; the launcher the
  # tests start is the normal build's deepshard (it only starts and watches processes; building it
  # instrumented would mean the whole tree under TSan).
  launcher="$PWD/${BUILD_DIR:-build}/deepshard"
  [[ -d "${BUILD_DIR:-build}" ]] || cmake -S . -B "${BUILD_DIR:-build}" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  ninja -C "${BUILD_DIR:-build}" -j "$jobs" deepshard
  configure build-tsan "-fsanitize=thread" -DDS_TEST_LAUNCHER="$launcher"
  ninja -C build-tsan -j "$jobs" comm_tests ds_comm_worker ds_job_worker
  echo "== comm_tests (TSan)"
  # Ranks report into their own files (the launcher shows only a rank's last lines): shown on failure.
  rm -f build-tsan/tsan-report.*
  TSAN_OPTIONS="ignore_noninstrumented_modules=1 halt_on_error=1 log_path=$PWD/build-tsan/tsan-report" \
    build-tsan/tests/comm_tests --gtest_brief=1 || { status=1; cat build-tsan/tsan-report.* 2>/dev/null || true; }
  echo "== TSan: builds and runs took $((SECONDS - tsan_start)) s"
fi
exit $status
