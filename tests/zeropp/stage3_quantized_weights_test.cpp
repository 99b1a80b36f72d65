// ZeRO++ quantized weights (zero_quantized_weights) on one host with 4 real ranks: every gather of
// a released block moves int8 blocks of 4096 elements plus an fp32 scale per block instead of fp32
// (the comms logger's all-gather sizes: 0.25x the bytes of the fp32 gathers they replace, bound
// 0.3x), the training stays within its loss budget of plain stage 3, and a run with it on resumes
// from its checkpoint bit for bit (the checkpoint holds the fp32 master slices, never the
// quantized copies).
//
// Loss budget: the mean loss of the last 5 of 20 steps within 1 % of plain stage 3's (measured:
// 0.35 %). Single steps may differ more: this run's step 14 is 4.34 against plain stage 3's 3.74.
// That step is not a gather error: evaluated with exact (fp32) gathers, the quantized run's master
// weights after step 13 give the same high loss (4.39), while quantized gathers over plain stage
// 3's master weights give 3.739 at that step; the quantized run's slightly different trajectory
// (int8 weights in every forward and backward of steps 1-13) meets an instability of this tiny,
// high-learning-rate setup that plain stage 3's trajectory passes, and the next step is back
// within 0.05 % of plain stage 3's.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "support/test_support.h"
#include "train/run_helpers.h"
#include "zeropp/released_stage3.h"
#include "zeropp/zeropp_checks.h"

namespace deepshard::testing {
namespace stage3_quantized_weights_test {

constexpr int kRanks = 4;
constexpr int64_t kSteps = 20;
// The tiny GPT's blocks: 12 * 64 * 64 + 13 * 64 elements each (fp32), a multiple of 4 ranks.
constexpr int64_t kTinyBlock = 12 * 64 * 64 + 13 * 64;
constexpr int64_t kSlice = kTinyBlock / kRanks;
constexpr int64_t kQuantBlock = 4096;  // QuantizedGather::kBlock

// Released stage 3 with quantized weights on or off.
std::string stage3(bool quantized, const std::string& more = "{}") {
  return released_stage3({{"zero_quantized_weights", quantized}}, more);
}

// Rank 0's all-gathers of `bytes` bytes in run <dir>/run_<name> (the comms logger's detail).
int64_t all_gathers_of(const TempDir& dir, const std::string& name, int64_t bytes) {
  const auto summary = nlohmann::json::parse(read_file(dir.file("run_" + name) + "/summary.json"));
  const auto& sizes = summary.at("comms_logger").at("all_gather");
  const std::string key = std::to_string(bytes);
  return sizes.contains(key) ? sizes.at(key).at("count").get<int64_t>() : 0;
}

TEST(Stage3QuantizedWeights, WithinTheLossBudgetAtAQuarterOfTheGatherBytes) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  const int64_t gas = 2, micro = 9;  // global batch 72
  const auto exact = train_and_read_losses(dir, data, kRanks, micro, gas, "exact", stage3(false));
  const auto quantized =
      train_and_read_losses(dir, data, kRanks, micro, gas, "quantized", stage3(true));
  expect_within_loss_budget(exact, quantized, "quantized weights");

  // Every block gather of the exact run (2 blocks x forward and backward x 2 micro-batches per
  // step) moved this rank's fp32 slice; the quantized run moved the same gathers as int8 values
  // plus one fp32 scale per 4096 values, and no block's fp32 slice.
  const int64_t gathers = kSteps * 2 * 2 * gas;
  const int64_t scale_bytes = 4 * ((kSlice + kQuantBlock - 1) / kQuantBlock);
  EXPECT_EQ(all_gathers_of(dir, "exact", 4 * kSlice), gathers) << exact.output;
  EXPECT_EQ(all_gathers_of(dir, "quantized", 4 * kSlice), 0) << quantized.output;
  EXPECT_EQ(all_gathers_of(dir, "quantized", kSlice), gathers) << quantized.output;
  EXPECT_EQ(all_gathers_of(dir, "quantized", scale_bytes), gathers) << quantized.output;
  const double ratio = double(kSlice + scale_bytes) / double(4 * kSlice);
  std::printf("block gathers: %lld of %lld fp32 bytes -> %lld int8 + %lld scale bytes (%.4fx)\n",
              static_cast<long long>(gathers), static_cast<long long>(4 * kSlice),
              static_cast<long long>(kSlice), static_cast<long long>(scale_bytes), ratio);
  EXPECT_LE(ratio, 0.3);
}

TEST(Stage3QuantizedWeights, CheckpointsResumeExactly) {
  expect_exact_resume(
      kRanks, [](const std::string& more) { return stage3(true, more); }, "quantized weights");
}

}  // namespace stage3_quantized_weights_test
}  // namespace deepshard::testing
