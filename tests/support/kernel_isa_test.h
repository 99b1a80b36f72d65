// Tests that run a kernel on each instruction-set level (platform/kernel_isa.h): the levels this
// CPU runs, a scoped force_kernel_isa, and a parameterised fixture over all three levels that
// forces its level for the test (skipped, and saying so, on a CPU that cannot run it).
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "platform/cpu_info.h"
#include "platform/kernel_isa.h"

namespace deepshard::testing {

inline std::vector<platform::KernelIsa> supported_kernel_isas() {
  std::vector<platform::KernelIsa> isas;
  for (platform::KernelIsa isa :
       {platform::KernelIsa::kScalar, platform::KernelIsa::kAvx2, platform::KernelIsa::kAvx512}) {
    if (platform::kernel_isa_supported(isa)) isas.push_back(isa);
  }
  return isas;
}

// Forces a level for its lifetime (nullopt: the detected one), then restores what was forced
// before (the test binary's DEEPSHARD_KERNEL_ISA, or nothing).
class ScopedKernelIsa {
 public:
  explicit ScopedKernelIsa(std::optional<platform::KernelIsa> isa)
      : previous_(platform::forced_kernel_isa()) {
    platform::force_kernel_isa(isa);
  }
  ~ScopedKernelIsa() { platform::force_kernel_isa(previous_); }
  ScopedKernelIsa(const ScopedKernelIsa&) = delete;
  ScopedKernelIsa& operator=(const ScopedKernelIsa&) = delete;

 private:
  std::optional<platform::KernelIsa> previous_;
};

// TEST_P(EachKernelIsa-derived fixture, ...) runs with GetParam() forced;
// INSTANTIATE_TEST_SUITE_P(Isas, Fixture, kAllKernelIsas, KernelIsaName) names them.
class EachKernelIsa : public ::testing::TestWithParam<platform::KernelIsa> {
 protected:
  void SetUp() override {
    if (!platform::kernel_isa_supported(GetParam())) {
      GTEST_SKIP() << "this CPU (" << platform::detect_cpu().isa() << ") does not run "
                   << platform::to_string(GetParam());
    }
    forced_.emplace(GetParam());
  }
  void TearDown() override { forced_.reset(); }

 private:
  std::optional<ScopedKernelIsa> forced_;
};

inline const auto kAllKernelIsas = ::testing::Values(
    platform::KernelIsa::kScalar, platform::KernelIsa::kAvx2, platform::KernelIsa::kAvx512);

inline std::string KernelIsaName(const ::testing::TestParamInfo<platform::KernelIsa>& info) {
  return platform::to_string(info.param);
}

}  // namespace deepshard::testing
