// The process-wide kernel instruction-set level (kernel_isa.h): detection from cpuid (GCC's ISA
// level names, as target attributes use them), the forced level, parsing.
#include "platform/kernel_isa.h"

#include <atomic>

#include "deepshard/util/error.h"
#include "platform/cpu_info.h"

namespace deepshard::platform {
namespace {

constexpr KernelIsa kBestFirst[] = {KernelIsa::kAvx512, KernelIsa::kAvx2, KernelIsa::kScalar};

std::atomic<int> g_forced{-1};  // a KernelIsa, or -1: none

}  // namespace

const char* to_string(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::kScalar:
      return "scalar";
    case KernelIsa::kAvx2:
      return "avx2";
    case KernelIsa::kAvx512:
      return "avx512";
  }
  return "unknown";
}

KernelIsa parse_kernel_isa(std::string_view name) {
  for (KernelIsa isa : kBestFirst) {
    if (name == to_string(isa)) return isa;
  }
  throw Error(detail::concat(
      "\"", name, "\": unknown kernel instruction set (expected avx512, avx2 or scalar)"));
}

bool kernel_isa_supported(KernelIsa isa) {
#if DS_X86_KERNELS
  static const bool avx2 = (__builtin_cpu_init(), __builtin_cpu_supports("x86-64-v3"));
  static const bool avx512 = __builtin_cpu_supports("x86-64-v4");
#else
  constexpr bool avx2 = false, avx512 = false;
#endif
  switch (isa) {
    case KernelIsa::kScalar:
      return true;
    case KernelIsa::kAvx2:
      return avx2;
    case KernelIsa::kAvx512:
      return avx512;
  }
  return false;
}

KernelIsa detected_kernel_isa() {
  for (KernelIsa isa : kBestFirst) {
    if (kernel_isa_supported(isa)) return isa;
  }
  return KernelIsa::kScalar;
}

void force_kernel_isa(std::optional<KernelIsa> isa) {
  DS_CHECK(!isa || kernel_isa_supported(*isa), Error, "the ", to_string(*isa),
           " kernels do not run on this CPU (", detect_cpu().isa(),
           "; the best it runs: ", to_string(detected_kernel_isa()), ")");
  g_forced.store(isa ? static_cast<int>(*isa) : -1, std::memory_order_relaxed);
}

std::optional<KernelIsa> forced_kernel_isa() {
  const int forced = g_forced.load(std::memory_order_relaxed);
  return forced < 0 ? std::nullopt : std::optional<KernelIsa>(static_cast<KernelIsa>(forced));
}

KernelIsa kernel_isa() {
  static const KernelIsa detected = detected_kernel_isa();
  const int forced = g_forced.load(std::memory_order_relaxed);
  return forced < 0 ? detected : static_cast<KernelIsa>(forced);
}

std::string kernel_isa_status() {
  const KernelIsa detected = detected_kernel_isa();
  if (const std::optional<KernelIsa> forced = forced_kernel_isa()) {
    return detail::concat(to_string(*forced), " (forced; this CPU runs up to ", to_string(detected),
                          ")");
  }
  return detail::concat(to_string(detected), " (the best this CPU runs)");
}

void force_kernel_isa_setting(std::string_view variable, std::string_view value) {
  try {
    force_kernel_isa(parse_kernel_isa(value));
  } catch (const Error& e) {
    throw UsageError(detail::concat(variable, "=", value, ": ", e.what()));
  }
}

}  // namespace deepshard::platform
