// ZeRO++ quantized gradients (zero_quantized_gradients) on one host with real ranks:
//  - the quantized reduction (int8 blocks and all-to-all, one stage or hierarchical) against the
//    fp32 reduce-scatter on random gradient-like data, within its derived bound at every element
//    (tests/workers/zero_worker.cpp, scenario quantized_reduce; the bound in quantized_reduce.h);
//  - stage 3 training with it tracks plain stage 3 within the loss budget while the gradient
//    reductions move int8 values and fp32 scales (the comms logger's all-to-alls) instead of the
//    fp32 reduce-scatters: at most 0.3x their bytes;
//  - a run with it resumes from its checkpoint bit for bit (the quantization is deterministic and
//    keeps no state: the checkpoint is plain stage 3's).
//
// Loss budget: the mean loss of the last 5 of 20 steps within 1 % of plain stage 3's.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "support/test_support.h"
#include "train/run_helpers.h"
#include "zeropp/released_stage3.h"
#include "zeropp/zeropp_checks.h"

namespace deepshard::testing {
namespace stage3_quantized_gradients_test {

constexpr int64_t kSteps = 20;

std::string stage3(bool quantized, const std::string& more = "{}") {
  return released_stage3({{"zero_quantized_gradients", quantized}}, more);
}

// Rank 0's bytes handed to `op` over run <dir>/run_<name> (the comms logger's detail).
int64_t bytes_of(const TempDir& dir, const std::string& name, const std::string& op) {
  const auto summary = nlohmann::json::parse(read_file(dir.file("run_" + name) + "/summary.json"));
  const auto& logger = summary.at("comms_logger");
  int64_t bytes = 0;
  if (!logger.contains(op)) return 0;
  for (const auto& [size, stats] : logger.at(op).items()) {
    bytes += std::stoll(size) * stats.at("count").get<int64_t>();
  }
  return bytes;
}

// (ranks, ranks per node): one stage on 2 ranks of one node and on 3 nodes of one rank;
// hierarchical with 2 "nodes" of 2 ranks on this host.
class QuantizedReduce : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(QuantizedReduce, WithinItsBoundOfTheFp32ReduceScatter) {
  const auto [ranks, per_node] = GetParam();
  auto r = run_ranks(ranks, binary_dir() + "/tests/ds_zero_worker",
                     {"quantized_reduce", std::to_string(per_node)}, 120);
  ASSERT_EQ(r.exit_status, 0) << r.output;
  for (int rank = 0; rank < ranks; ++rank) {
    EXPECT_NE(r.output.find("scenario quantized_reduce passed on rank " + std::to_string(rank)),
              std::string::npos)
        << r.output;
  }
  const size_t line = r.output.find("rank 0: quantized reduction within");
  if (line != std::string::npos) std::printf("%s\n", r.output.substr(line, 80).c_str());
}

INSTANTIATE_TEST_SUITE_P(Layouts, QuantizedReduce,
                         ::testing::Values(std::make_tuple(2, 2), std::make_tuple(3, 1),
                                           std::make_tuple(4, 2)),
                         [](const auto& info) {
                           return std::to_string(std::get<0>(info.param)) + "ranks_" +
                                  std::to_string(std::get<1>(info.param)) + "per_node";
                         });

TEST(Stage3QuantizedGradients, WithinTheLossBudgetAtAQuarterOfTheGradientBytes) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  const int ranks = 2;
  const int64_t gas = 2, micro = 9;
  const auto exact = train_and_read_losses(dir, data, ranks, micro, gas, "exact", stage3(false));
  const auto quantized =
      train_and_read_losses(dir, data, ranks, micro, gas, "quantized", stage3(true));
  expect_within_loss_budget(exact, quantized, "quantized gradients");

  // The gradient reductions: plain stage 3's fp32 reduce-scatters against the quantized run's
  // all-to-alls (int8 values and scales); neither run has the other's.
  const int64_t fp32 = bytes_of(dir, "exact", "reduce_scatter");
  const int64_t int8 = bytes_of(dir, "quantized", "all_to_all");
  EXPECT_EQ(bytes_of(dir, "exact", "all_to_all"), 0);
  EXPECT_EQ(bytes_of(dir, "quantized", "reduce_scatter"), 0);
  ASSERT_GT(fp32, 0);
  const double ratio = double(int8) / double(fp32);
  std::printf(
      "gradient bytes of rank 0 over %lld steps: fp32 reduce-scatter %lld, quantized %lld "
      "(%.4fx)\n",
      static_cast<long long>(kSteps), static_cast<long long>(fp32), static_cast<long long>(int8),
      ratio);
  EXPECT_LE(ratio, 0.3);
}

TEST(Stage3QuantizedGradients, CheckpointsResumeExactly) {
  expect_exact_resume(
      2, [](const std::string& more) { return stage3(true, more); }, "quantized gradients");
}

}  // namespace stage3_quantized_gradients_test
}  // namespace deepshard::testing
