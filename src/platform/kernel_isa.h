// Which instruction set deepshard's own vector kernels run, one choice for the whole process: the
// fused operators of src/kernels (layer norm, tanh-GELU, causal softmax and attention, cross
// entropy), block-wise int8 quantization and the Adam step. Each is compiled three times in one
// build (function target attributes; no -march flag) and dispatches on kernel_isa() at every call:
//   avx512  x86-64-v4: AVX-512 F/BW/DQ/VL (and everything of avx2)
//   avx2    x86-64-v3: AVX2, FMA, BMI, F16C
//   scalar  the baseline x86-64 build (SSE2 at most; no fused multiply-add)
// The best level this CPU supports is used unless force_kernel_isa chose one: the executable's
// DEEPSHARD_KERNEL_ISA (src/cli/process_options.cpp) and the test binaries' main
// (tests/support/forced_kernel_paths.cpp) read it once at start, so that every level a CPU can run
// is testable on it. libtorch's own kernels, oneDNN and OpenBLAS choose for themselves
// (OPENBLAS_CORETYPE forces OpenBLAS's: docs/performance.md).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#if defined(__x86_64__) && defined(__GNUC__)
#define DS_X86_KERNELS 1
// A function compiled for one level (its intrinsics and its auto-vectorised loops).
#define DS_TARGET_AVX2 __attribute__((target("arch=x86-64-v3")))
#define DS_TARGET_AVX512 __attribute__((target("arch=x86-64-v4")))
#else
#define DS_X86_KERNELS 0
#endif

namespace deepshard::platform {

enum class KernelIsa { kScalar, kAvx2, kAvx512 };

const char* to_string(KernelIsa isa);  // "scalar", "avx2", "avx512"
// The level named `name`; throws Error naming it and the accepted names otherwise.
KernelIsa parse_kernel_isa(std::string_view name);

// Whether this CPU (cpuid, with the OS saving the wide registers) and this build run the level;
// kScalar always.
bool kernel_isa_supported(KernelIsa isa);
// The best level this CPU runs.
KernelIsa detected_kernel_isa();

// Forces the level for the whole process (nullopt: the detected one again). Throws Error naming
// the level and this CPU's ISA when the CPU cannot run it. Not synchronised with kernels running
// on other threads: set it at start, or between kernel calls (tests).
void force_kernel_isa(std::optional<KernelIsa> isa);
std::optional<KernelIsa> forced_kernel_isa();

// The level the kernels run: the forced one, else the detected one.
KernelIsa kernel_isa();
// One line for the start-up line and `deepshard doctor`: "avx2 (forced; this CPU: avx512)",
// "avx512 (the best this CPU runs)".
std::string kernel_isa_status();

// Forces the level from a setting the user wrote (`variable`=`value`, e.g. DEEPSHARD_KERNEL_ISA):
// throws UsageError naming both when the value is not a level or the CPU cannot run it.
void force_kernel_isa_setting(std::string_view variable, std::string_view value);

}  // namespace deepshard::platform
