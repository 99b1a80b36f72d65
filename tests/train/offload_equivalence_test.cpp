// ZeRO-Offload and ZeRO-Infinity change where the optimizer state lives, never the arithmetic:
// `deepshard train` with real ranks (N = 2 and 3, 20 steps of the tiny GPT, clipping on) gives bit
// for bit the losses of the same run without offload, with offload_optimizer cpu and nvme (a
// sub_group_size small enough that every step swaps many sub-groups, with and without the read and
// write pipelines), in fp32, bf16 and fp16 (dynamic loss scaling). The swap files are gone after
// the run, and the ledger puts the optimizer state on NVMe.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "support/test_support.h"
#include "train/run_helpers.h"

namespace deepshard::testing {
namespace offload_equivalence_test {

constexpr int64_t kGlobalBatch = 36;

nlohmann::json offload(const std::string& device, const std::string& nvme_path,
                       bool pipeline = false) {
  nlohmann::json o = {{"device", device}};
  if (device == "nvme") o["nvme_path"] = nvme_path;
  if (pipeline) {
    o["pipeline_read"] = true;
    o["pipeline_write"] = true;
    o["buffer_count"] = 9;  // three sub-groups of (up to) three arrays in flight
  }
  return o;
}

void expect_identical(const RunLosses& run, const RunLosses& reference, const std::string& what) {
  ASSERT_EQ(run.losses.size(), reference.losses.size()) << what << "\n" << run.output;
  for (size_t i = 0; i < run.losses.size(); ++i)
    EXPECT_EQ(run.losses[i], reference.losses[i]) << what << ", step " << i + 1;
  std::printf("%s: %zu losses identical to the run without offload\n", what.c_str(),
              run.losses.size());
}

struct Case {
  int stage;
  std::string precision;  // "fp32" | "bf16" | "fp16" (the config section switched on)
};

class OffloadOptimizer12 : public ::testing::TestWithParam<Case> {};

TEST_P(OffloadOptimizer12, LossesEqualTheRunWithoutOffloadBitForBit) {
  const Case c = GetParam();
  TempDir dir;
  const std::string data = make_token_file(dir);
  const std::string nvme = dir.file("nvme");
  std::filesystem::create_directories(nvme);
  for (int ranks : {2, 3}) {
    const int64_t gas = c.stage == 2 && ranks == 2 ? 2 : 1;
    const int64_t micro = kGlobalBatch / (ranks * gas);
    auto zero = [&](const nlohmann::json& off) {
      nlohmann::json extra = {
          {"zero_optimization", {{"stage", c.stage}, {"sub_group_size", 3000}}}};
      if (!off.is_null()) extra["zero_optimization"]["offload_optimizer"] = off;
      if (c.precision != "fp32") extra[c.precision] = {{"enabled", true}};
      return extra.dump();
    };
    const std::string tag =
        "s" + std::to_string(c.stage) + "_" + c.precision + "_n" + std::to_string(ranks);
    auto reference = train_and_read_losses(dir, data, ranks, micro, gas, tag + "_none", zero({}));
    ASSERT_EQ(reference.losses.size(), 20u) << reference.output;
    auto cpu = train_and_read_losses(dir, data, ranks, micro, gas, tag + "_cpu",
                                     zero(offload("cpu", nvme)));
    expect_identical(cpu, reference, tag + " offload_optimizer cpu");
    EXPECT_NE(cpu.output.find("offload_optimizer.device cpu: the compute device is the CPU"),
              std::string::npos)
        << cpu.output;
    auto swapped = train_and_read_losses(dir, data, ranks, micro, gas, tag + "_nvme",
                                         zero(offload("nvme", nvme, /*pipeline=*/ranks == 3)));
    expect_identical(swapped, reference, tag + " offload_optimizer nvme");
    EXPECT_NE(swapped.output.find("sub-groups (of at most 3000 elements) swapped"),
              std::string::npos)
        << swapped.output;
    EXPECT_TRUE(std::filesystem::is_empty(nvme)) << "swap files left in " << nvme;
    // The ledger: Adam state on NVMe, buffers in host memory, nothing of it on the device.
    const auto summary =
        nlohmann::json::parse(read_file(dir.file("run_" + tag + "_nvme") + "/summary.json"));
    const auto& report = summary.at("memory_report");
    EXPECT_GT(report.at("optimizer_state").at("ledger_at").at("nvme").get<int64_t>(), 0)
        << report.dump();
    EXPECT_EQ(report.at("optimizer_state").at("ledger_at").at("compute").get<int64_t>(), 0)
        << report.dump();
    EXPECT_GT(report.at("swap_buffers").at("ledger_at").at("host").get<int64_t>(), 0)
        << report.dump();
  }
}

INSTANTIATE_TEST_SUITE_P(Stages, OffloadOptimizer12,
                         ::testing::Values(Case{1, "fp32"}, Case{2, "fp32"}, Case{1, "bf16"},
                                           Case{2, "bf16"}, Case{2, "fp16"}),
                         [](const auto& info) {
                           return "stage" + std::to_string(info.param.stage) + "_" +
                                  info.param.precision;
                         });

// Stage 3: offload_optimizer nvme (all sub-groups swapped, and ratio 0.5: half of them resident),
// offload_param nvme (every released unit's slice on NVMe), both, and cpu for both, in fp32 at
// N = 2 and 3; both nvme and ratio 0.5 in bf16 and fp16 at N = 2.
TEST(OffloadStage3, LossesEqualTheRunWithoutOffloadBitForBit) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  const std::string nvme = dir.file("nvme");
  std::filesystem::create_directories(nvme);
  for (const std::string precision : {"fp32", "bf16", "fp16"}) {
    for (int ranks : {2, 3}) {
      if (precision != "fp32" && ranks == 3) continue;
      auto zero = [&](const nlohmann::json& opt, const nlohmann::json& param) {
        // Persistence threshold 0: only the root stays gathered, the blocks' slices can be swapped.
        nlohmann::json extra = {
            {"zero_optimization",
             {{"stage", 3}, {"sub_group_size", 3000}, {"stage3_param_persistence_threshold", 0}}}};
        if (!opt.is_null()) extra["zero_optimization"]["offload_optimizer"] = opt;
        if (!param.is_null()) extra["zero_optimization"]["offload_param"] = param;
        if (precision != "fp32") extra[precision] = {{"enabled", true}};
        return extra.dump();
      };
      const std::string tag = "s3_" + precision + "_n" + std::to_string(ranks);
      const int64_t micro = kGlobalBatch / ranks;
      auto reference =
          train_and_read_losses(dir, data, ranks, micro, 1, tag + "_none", zero({}, {}));
      ASSERT_EQ(reference.losses.size(), 20u) << reference.output;
      const nlohmann::json param_nvme = {
          {"device", "nvme"}, {"nvme_path", nvme}, {"max_in_cpu", 0}, {"buffer_size", 100000}};
      auto both = train_and_read_losses(dir, data, ranks, micro, 1, tag + "_both",
                                        zero(offload("nvme", nvme, ranks == 3), param_nvme));
      expect_identical(both, reference, tag + " offload_optimizer nvme + offload_param nvme");
      EXPECT_NE(both.output.find("units' slices on NVMe"), std::string::npos) << both.output;
      nlohmann::json half = offload("nvme", nvme);
      half["ratio"] = 0.5;
      auto ratio =
          train_and_read_losses(dir, data, ranks, micro, 1, tag + "_ratio", zero(half, {}));
      expect_identical(ratio, reference, tag + " offload_optimizer nvme, ratio 0.5");
      if (precision != "fp32") continue;
      auto opt_nvme = train_and_read_losses(dir, data, ranks, micro, 1, tag + "_optnvme",
                                            zero(offload("nvme", nvme), {}));
      expect_identical(opt_nvme, reference, tag + " offload_optimizer nvme");
      auto params_only =
          train_and_read_losses(dir, data, ranks, micro, 1, tag + "_parnvme", zero({}, param_nvme));
      expect_identical(params_only, reference, tag + " offload_param nvme");
      auto both_cpu = train_and_read_losses(dir, data, ranks, micro, 1, tag + "_cpu",
                                            zero(offload("cpu", nvme), offload("cpu", nvme)));
      expect_identical(both_cpu, reference, tag + " offload_optimizer cpu + offload_param cpu");
      EXPECT_TRUE(std::filesystem::is_empty(nvme)) << "swap files left in " << nvme;
    }
  }
}

}  // namespace offload_equivalence_test
}  // namespace deepshard::testing
