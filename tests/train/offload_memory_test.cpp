// Offload accounting, end to end: `deepshard train --memory-report` with 2 real ranks for every
// offload combination the stage supports. The ledger (rank 0's summary.json) and the estimator
// put every category in the same places (compute device / host / NVMe) with the same bytes
// (within the padding the estimator does not model), and the swap buffers agree.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "support/test_support.h"
#include "train/run_helpers.h"

namespace deepshard::testing {
namespace offload_memory_test {

struct Combo {
  int stage;
  std::string optimizer, param, precision;
  double ratio = 1.0;
};

std::string name_of(const Combo& c) {
  return "s" + std::to_string(c.stage) + "_opt" + c.optimizer + "_par" + c.param + "_" +
         c.precision + (c.ratio < 1.0 ? "_ratio" : "");
}

void check(const TempDir& dir, const std::string& data, const Combo& c) {
  const std::string name = name_of(c);
  const std::string nvme = dir.file("nvme");
  std::filesystem::create_directories(nvme);
  nlohmann::json zero = {{"stage", c.stage}, {"sub_group_size", 5000}};
  if (c.stage == 3) zero["stage3_param_persistence_threshold"] = 0;  // only the root persists
  if (c.optimizer != "none") {
    zero["offload_optimizer"] = {{"device", c.optimizer}, {"nvme_path", nvme}, {"ratio", c.ratio}};
  }
  if (c.param != "none") {
    zero["offload_param"] = {
        {"device", c.param}, {"nvme_path", nvme}, {"max_in_cpu", 0}, {"buffer_size", 100000}};
  }
  nlohmann::json extra = {{"zero_optimization", zero}};
  if (c.precision == "bf16") extra["bf16"] = {{"enabled", true}};
  const std::string config = dir.file(name + ".json");
  write_file(config, tiny_run_config(data, dir.file("run_" + name), 4, 1, 2, extra.dump()));
  auto r = run_ranks(2, deepshard_exe(), {"train", "--config", config, "--memory-report"}, 120);
  ASSERT_EQ(r.exit_status, 0) << r.output;
  const auto report = nlohmann::json::parse(read_file(dir.file("run_" + name) + "/summary.json"))
                          .at("memory_report");
  for (const char* category :
       {"parameters", "gradients", "master_weights", "optimizer_state", "swap_buffers"}) {
    const auto& row = report.at(category);
    for (const char* place : {"compute", "host", "nvme"}) {
      const int64_t ledger = row.at("ledger_at").at(place);
      const int64_t estimate = row.at("estimate_at").at(place);
      // Padding: the estimator pads the shard once, the engine per bucket or unit (and the swap
      // files' sub-groups to 4 KiB).
      EXPECT_LE(std::abs(ledger - estimate), 0.03 * estimate + 64 * 1024)
          << name << ", " << category << " on " << place << ": ledger " << ledger << ", estimate "
          << estimate;
      EXPECT_EQ(ledger > 0, estimate > 0) << name << ", " << category << " on " << place;
    }
  }
  std::printf("%s: ledger and estimate agree by place\n%s\n", name.c_str(), report.dump().c_str());
}

TEST(OffloadMemory, LedgerAndEstimatorAgreeByPlaceForEveryCombination) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  for (int stage : {1, 2}) {
    for (const char* opt : {"none", "cpu", "nvme"}) {
      for (const char* precision : {"fp32", "bf16"})
        check(dir, data, {stage, opt, "none", precision});
    }
  }
  for (const char* opt : {"none", "cpu", "nvme"}) {
    for (const char* param : {"none", "cpu", "nvme"}) check(dir, data, {3, opt, param, "fp32"});
  }
  check(dir, data, {3, "nvme", "nvme", "bf16"});
  check(dir, data, {3, "nvme", "none", "fp32", 0.5});
  check(dir, data, {3, "cpu", "none", "bf16", 0.5});
}

}  // namespace offload_memory_test
}  // namespace deepshard::testing
