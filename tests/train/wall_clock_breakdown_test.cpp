// wall_clock_breakdown: per-step forward / backward / optimizer times in metrics.jsonl (each within
// the step's wall time), the printout every steps_per_print steps, and summary.json's FLOPs per
// token (from the model's shapes), achieved GFLOP/s and MFU against the measured matmul peak.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "deepshard/config/loader.h"
#include "deepshard/models/flops.h"
#include "deepshard/train/trainer.h"
#include "models/registry.h"
#include "support/test_support.h"
#include "train/run_helpers.h"

namespace deepshard::testing {
namespace wall_clock_breakdown_test {

TEST(WallClockBreakdown, TimesEachPhaseAndReportsMfu) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  const std::string config = dir.file("run.json");
  write_file(config, tiny_run_config(data, dir.file("run"), 2, 2, 4,
                                     R"({"wall_clock_breakdown": true, "steps_per_print": 2})"));
  const auto r = run_ranks(2, deepshard_exe(), {"train", "--config", config}, 180);
  ASSERT_EQ(r.exit_status, 0) << r.output;
  EXPECT_NE(r.output.find("step 2 | time (ms) | fwd: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("step 4 | time (ms) | fwd: "), std::string::npos) << r.output;

  for (const auto& m : read_metrics(dir.file("run"))) {
    const double fwd = m.at("forward_s"), bwd = m.at("backward_s"), opt = m.at("optimizer_s");
    EXPECT_GT(fwd, 0);
    EXPECT_GT(bwd, 0);
    EXPECT_GT(opt, 0);
    EXPECT_LE(fwd + bwd + opt, m.at("step_time_s").get<double>()) << m.dump();
  }
  const auto summary = nlohmann::json::parse(read_file(dir.file("run") + "/summary.json"));
  const auto run = config::parse_run_config(nlohmann::json::parse(read_file(config)), 2, nullptr,
                                            config, models::arch_schemas());
  const double flops = train::training_flops_per_token(run.model);
  EXPECT_DOUBLE_EQ(summary.at("flops_per_token").get<double>(), flops);
  const double tokens_per_s = summary.at("mean_tokens_per_s");
  EXPECT_NEAR(summary.at("achieved_gflops_per_rank").get<double>(), flops * tokens_per_s / 2 / 1e9,
              1e-9 * flops * tokens_per_s);
  const double peak = summary.at("matmul_peak_gflops_per_rank");
  EXPECT_GT(peak, 0);
  EXPECT_NEAR(summary.at("mfu").get<double>(),
              summary.at("achieved_gflops_per_rank").get<double>() / peak, 1e-12);
  EXPECT_EQ(summary.at("wall_clock_breakdown").at("steps").get<int64_t>(), 3);  // after step 1
}

TEST(WallClockBreakdown, OffByDefault) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  const std::string config = dir.file("run.json");
  write_file(config, tiny_run_config(data, dir.file("run"), 2, 1, 2));
  const auto r = run_deepshard({"train", "--config", config}, 120);
  ASSERT_EQ(r.exit_status, 0) << r.output;
  EXPECT_EQ(r.output.find("time (ms)"), std::string::npos) << r.output;
  for (const auto& m : read_metrics(dir.file("run"))) EXPECT_FALSE(m.contains("forward_s"));
  const auto summary = nlohmann::json::parse(read_file(dir.file("run") + "/summary.json"));
  EXPECT_GT(summary.at("flops_per_token").get<double>(), 0);
  EXPECT_FALSE(summary.contains("mfu"));
}

}  // namespace wall_clock_breakdown_test
}  // namespace deepshard::testing
