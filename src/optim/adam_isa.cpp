// Which Adam kernel variant runs: the best one the CPU supports, or the one force_adam_isa set
// (the executable's DEEPSHARD_ADAM_ISA, tests and benchmarks).
#include <atomic>
#include <string>

#include "deepshard/optim/adam.h"
#include "deepshard/util/error.h"
#include "optim/adam_chunk.h"

namespace deepshard::optim {

const char* to_string(AdamIsa isa) {
  switch (isa) {
    case AdamIsa::kScalar:
      return "scalar";
    case AdamIsa::kAvx2:
      return "avx2";
    case AdamIsa::kAvx512:
      return "avx512";
  }
  return "unknown";
}

bool adam_isa_supported(AdamIsa isa) {
  switch (isa) {
    case AdamIsa::kScalar:
      return true;
#if DS_ADAM_X86_KERNELS
    case AdamIsa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case AdamIsa::kAvx512:
      return __builtin_cpu_supports("avx512f");
#else
    case AdamIsa::kAvx2:
    case AdamIsa::kAvx512:
      return false;
#endif
  }
  return false;
}

namespace {
std::atomic<int> g_forced{-1};  // an AdamIsa, or -1: none
}  // namespace

AdamIsa parse_adam_isa(const std::string& name) {
  for (AdamIsa isa : {AdamIsa::kAvx512, AdamIsa::kAvx2, AdamIsa::kScalar}) {
    if (name == to_string(isa)) return isa;
  }
  throw Error(detail::concat("\"", name,
                             "\": unknown Adam kernel variant (expected avx512, avx2 or scalar)"));
}

void force_adam_isa(std::optional<AdamIsa> isa) {
  DS_CHECK(!isa || adam_isa_supported(*isa), Error, "this CPU (or build) cannot run the ",
           to_string(*isa), " Adam kernel");
  g_forced = isa ? static_cast<int>(*isa) : -1;
}

std::optional<AdamIsa> forced_adam_isa() {
  const int forced = g_forced.load();
  return forced < 0 ? std::nullopt : std::optional<AdamIsa>(static_cast<AdamIsa>(forced));
}

AdamIsa adam_isa() {
  if (const std::optional<AdamIsa> forced = forced_adam_isa()) return *forced;
  for (AdamIsa isa : {AdamIsa::kAvx512, AdamIsa::kAvx2}) {
    if (adam_isa_supported(isa)) return isa;
  }
  return AdamIsa::kScalar;
}

}  // namespace deepshard::optim
