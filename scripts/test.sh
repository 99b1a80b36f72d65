#!/usr/bin/env bash
# The whole test suite: installs and builds what is missing, runs every test with CTest (multi-rank
# tests start real rank processes), then the sanitizer passes (scripts/sanitize.sh all;
# docs/reliability.md, "Sanitizers"): every unit-test binary (the readers' fuzz cases included) and
# config_tests under ASan+UBSan, the comm tests (real ranks) under TSan. Usage: scripts/test.sh
# [--isa avx512|avx2|scalar] [extra ctest args]; with ctest arguments (a subset: -R ...) the
# sanitizer passes are skipped.
#
# --isa LEVEL runs everything on one CPU path (docs/performance.md, "Forcing a kernel path"), as
# on a CPU whose best level it is: DEEPSHARD_KERNEL_ISA=LEVEL (deepshard's own kernels), and unless
# already set, OPENBLAS_CORETYPE (SkylakeX, Haswell, Prescott), ATEN_CPU_CAPABILITY (libtorch's
# vectorised kernels: avx512, avx2, default) and, below avx512, DEEPSHARD_BF16_COMPUTE=fp32 (bf16
# models multiply in fp32, as deepshard chooses on a CPU without bf16 arithmetic). A level the CPU
# lacks is refused by every test binary and deepshard process.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--isa" ]; then
  isa="${2:-}"
  shift 2 || shift
  case "$isa" in
    avx512) core=SkylakeX aten=avx512 compute="" ;;
    avx2) core=Haswell aten=avx2 compute=fp32 ;;
    scalar) core=Prescott aten=default compute=fp32 ;;
    *)
      echo "scripts/test.sh: --isa '$isa': expected avx512, avx2 or scalar" >&2
      exit 2
      ;;
  esac
  export DEEPSHARD_KERNEL_ISA="$isa"
  export OPENBLAS_CORETYPE="${OPENBLAS_CORETYPE:-$core}"
  export ATEN_CPU_CAPABILITY="${ATEN_CPU_CAPABILITY:-$aten}"
  if [ -n "$compute" ]; then export DEEPSHARD_BF16_COMPUTE="${DEEPSHARD_BF16_COMPUTE:-$compute}"; fi
  echo "scripts/test.sh: DEEPSHARD_KERNEL_ISA=$DEEPSHARD_KERNEL_ISA" \
    "OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE ATEN_CPU_CAPABILITY=$ATEN_CPU_CAPABILITY" \
    "DEEPSHARD_BF16_COMPUTE=${DEEPSHARD_BF16_COMPUTE:-auto}" >&2
fi
scripts/setup.sh
build_dir="${BUILD_DIR:-build}"
(cd "$build_dir" && ctest --output-on-failure -j "${JOBS:-2}" "$@")
[ $# -gt 0 ] || scripts/sanitize.sh all
