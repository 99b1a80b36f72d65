# shellcheck shell=bash
# Sourced by scripts/test.sh and scripts/bench_peers.sh (not run alone): one CPU path for
# everything a run starts, as on a CPU whose best level it is (docs/performance.md, "Forcing a
# kernel path").
#
# force_isa LEVEL (avx512, avx2 or scalar) exports
#   DEEPSHARD_KERNEL_ISA=LEVEL      deepshard's own kernels (refused by every deepshard process and
#                                   test binary when the CPU lacks the level);
# and, each only where the environment does not set it already (a set value is never overridden):
#   OPENBLAS_CORETYPE               OpenBLAS's core: SkylakeX, Haswell, Prescott;
#   ATEN_CPU_CAPABILITY             libtorch's vectorised kernels: avx512, avx2, default;
#   ONEDNN_MAX_CPU_ISA              oneDNN's kernels (deepshard's Linear layers and libtorch's):
#                                   AVX512_CORE, AVX2, SSE41 (oneDNN's lowest);
#   DEEPSHARD_BF16_COMPUTE=fp32     below avx512: bf16 models multiply in fp32, as deepshard
#                                   chooses on a CPU without bf16 arithmetic.
# Below avx512 libtorch's own bf16 products also leave oneDNN, as libtorch 1.13 does on a CPU
# without AVX-512 BW/VL/DQ: deepshard's processes and test binaries do it from
# DEEPSHARD_KERNEL_ISA (kernels/libtorch_bf16.h), the PyTorch peer from
# isa_peer_args (--no-onednn-bf16).
# Sets isa_line (one line naming what is in force, for logs and table headers) and isa_peer_args
# (the array of options bench/torch_peer_bench.py takes to match).
# shellcheck disable=SC2034  # isa_line and isa_peer_args are for the sourcing script
force_isa() {
  local core aten dnnl compute
  case "${1:-}" in
    avx512) core=SkylakeX aten=avx512 dnnl=AVX512_CORE compute="" isa_peer_args=() ;;
    avx2) core=Haswell aten=avx2 dnnl=AVX2 compute=fp32 isa_peer_args=(--no-onednn-bf16) ;;
    scalar) core=Prescott aten=default dnnl=SSE41 compute=fp32 isa_peer_args=(--no-onednn-bf16) ;;
    *)
      echo "$0: --isa '${1:-}': expected avx512, avx2 or scalar" >&2
      exit 2
      ;;
  esac
  export DEEPSHARD_KERNEL_ISA="$1"
  export OPENBLAS_CORETYPE="${OPENBLAS_CORETYPE:-$core}"
  export ATEN_CPU_CAPABILITY="${ATEN_CPU_CAPABILITY:-$aten}"
  export ONEDNN_MAX_CPU_ISA="${ONEDNN_MAX_CPU_ISA:-$dnnl}"
  if [ -n "$compute" ]; then export DEEPSHARD_BF16_COMPUTE="${DEEPSHARD_BF16_COMPUTE:-$compute}"; fi
  isa_line="DEEPSHARD_KERNEL_ISA=$DEEPSHARD_KERNEL_ISA OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE"
  isa_line+=" ATEN_CPU_CAPABILITY=$ATEN_CPU_CAPABILITY ONEDNN_MAX_CPU_ISA=$ONEDNN_MAX_CPU_ISA"
  isa_line+=" DEEPSHARD_BF16_COMPUTE=${DEEPSHARD_BF16_COMPUTE:-auto}"
}
