// The kernels' instruction-set level (platform/kernel_isa.h): the detected level is the best this
// CPU runs, a forced level is used and undone, a level the CPU lacks and an unknown name are
// refused naming them; and the executable's DEEPSHARD_KERNEL_ISA (DEEPSHARD_ADAM_ISA, the older
// name) and DEEPSHARD_BF16_COMPUTE as `deepshard doctor` reports them, or refuses them.
#include "platform/kernel_isa.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "deepshard/util/error.h"
#include "platform/cpu_info.h"
#include "support/kernel_isa_test.h"
#include "support/test_support.h"

namespace deepshard::platform {
namespace kernel_isa_test {

TEST(KernelIsa, DetectedIsTheBestSupportedAndAForcedOneIsUsed) {
  const CpuInfo cpu = detect_cpu();
  EXPECT_TRUE(kernel_isa_supported(KernelIsa::kScalar));
  EXPECT_EQ(kernel_isa_supported(KernelIsa::kAvx2), cpu.avx2);
  EXPECT_EQ(kernel_isa_supported(KernelIsa::kAvx512), cpu.avx512);
  const KernelIsa best = cpu.avx512 ? KernelIsa::kAvx512
                         : cpu.avx2 ? KernelIsa::kAvx2
                                    : KernelIsa::kScalar;
  {
    testing::ScopedKernelIsa detected(std::nullopt);
    EXPECT_EQ(detected_kernel_isa(), best);
    EXPECT_EQ(kernel_isa(), best);
    EXPECT_EQ(forced_kernel_isa(), std::nullopt);
    EXPECT_NE(kernel_isa_status().find("the best this CPU runs"), std::string::npos);
  }
  ::testing::Test::RecordProperty("detected", to_string(best));
  for (KernelIsa isa : testing::supported_kernel_isas()) {
    testing::ScopedKernelIsa forced(isa);
    EXPECT_EQ(kernel_isa(), isa);
    EXPECT_EQ(kernel_isa_status(), detail::concat(to_string(isa), " (forced; this CPU runs up to ",
                                                  to_string(best), ")"));
  }
}

TEST(KernelIsa, RefusesUnknownNamesAndLevelsTheCpuLacks) {
  for (KernelIsa isa : {KernelIsa::kAvx512, KernelIsa::kAvx2, KernelIsa::kScalar}) {
    EXPECT_EQ(parse_kernel_isa(to_string(isa)), isa);
  }
  try {
    parse_kernel_isa("sse9");
    ADD_FAILURE() << "an unknown level was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("\"sse9\": unknown kernel instruction set (expected "
                                         "avx512, avx2 or scalar)"),
              std::string::npos)
        << e.what();
  }
  const std::optional<KernelIsa> before = forced_kernel_isa();
  EXPECT_THROW(force_kernel_isa_setting("DEEPSHARD_KERNEL_ISA", "sse9"), UsageError);
  for (KernelIsa isa : {KernelIsa::kAvx2, KernelIsa::kAvx512}) {
    if (kernel_isa_supported(isa)) continue;
    try {
      force_kernel_isa_setting("DEEPSHARD_KERNEL_ISA", to_string(isa));
      ADD_FAILURE() << to_string(isa) << " was forced on a CPU without it";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(detail::concat("DEEPSHARD_KERNEL_ISA=", to_string(isa),
                                                          ": the ", to_string(isa),
                                                          " kernels do not run on this CPU")),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(forced_kernel_isa(), before);  // a refused setting changes nothing
}

// `deepshard doctor --size 16` with exactly the settings `env` gives (those of this test process,
// under scripts/test.sh --isa, are cleared: empty counts as unset).
launch::RunResult doctor(const std::map<std::string, std::string>& env) {
  std::map<std::string, std::string> full = {
      {"DEEPSHARD_KERNEL_ISA", ""}, {"DEEPSHARD_ADAM_ISA", ""}, {"DEEPSHARD_BF16_COMPUTE", ""}};
  for (const auto& [name, value] : env) full[name] = value;
  return testing::run_deepshard({"doctor", "--size", "16"}, 120, full);
}

TEST(KernelIsa, TheExecutableForcesTheLevelAndTheBf16ComputeFromItsEnvironment) {
  const launch::RunResult scalar =
      doctor({{"DEEPSHARD_KERNEL_ISA", "scalar"}, {"DEEPSHARD_BF16_COMPUTE", "fp32"}});
  ASSERT_EQ(scalar.exit_status, 0) << scalar.output;
  EXPECT_NE(scalar.output.find("kernels:          scalar (forced; this CPU runs up to " +
                               std::string(to_string(detected_kernel_isa())) + ")"),
            std::string::npos)
      << scalar.output;
  EXPECT_NE(scalar.output.find("bf16 compute:     fp32 (set by DEEPSHARD_BF16_COMPUTE)"),
            std::string::npos)
      << scalar.output;

  const launch::RunResult alias = doctor({{"DEEPSHARD_ADAM_ISA", "scalar"}});
  ASSERT_EQ(alias.exit_status, 0) << alias.output;
  EXPECT_NE(alias.output.find("kernels:          scalar (forced"), std::string::npos)
      << alias.output;

  const launch::RunResult detected = doctor({});
  ASSERT_EQ(detected.exit_status, 0) << detected.output;
  EXPECT_NE(
      detected.output.find("kernels:          " + std::string(to_string(detected_kernel_isa())) +
                           " (the best this CPU runs)"),
      std::string::npos)
      << detected.output;

  const launch::RunResult unknown = doctor({{"DEEPSHARD_KERNEL_ISA", "sse9"}});
  EXPECT_EQ(unknown.exit_status, 2) << unknown.output;
  EXPECT_NE(unknown.output.find("DEEPSHARD_KERNEL_ISA=sse9: \"sse9\": unknown kernel instruction "
                                "set"),
            std::string::npos)
      << unknown.output;

  const launch::RunResult disagree =
      doctor({{"DEEPSHARD_KERNEL_ISA", "scalar"}, {"DEEPSHARD_ADAM_ISA", "avx2"}});
  EXPECT_EQ(disagree.exit_status, 2) << disagree.output;
  EXPECT_NE(
      disagree.output.find("DEEPSHARD_KERNEL_ISA=scalar and DEEPSHARD_ADAM_ISA=avx2 disagree"),
      std::string::npos)
      << disagree.output;

  const launch::RunResult bad_compute = doctor({{"DEEPSHARD_BF16_COMPUTE", "bf16"}});
  EXPECT_EQ(bad_compute.exit_status, 2) << bad_compute.output;
  EXPECT_NE(bad_compute.output.find("DEEPSHARD_BF16_COMPUTE bf16: expected auto (the default), "
                                    "native or fp32"),
            std::string::npos)
      << bad_compute.output;
}

}  // namespace kernel_isa_test
}  // namespace deepshard::platform
