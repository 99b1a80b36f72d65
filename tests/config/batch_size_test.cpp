// The batch triple of deepspeed-behavior.md §1.2: every row of the derivation table, DeepSpeed's
// floor divisions (T=10, M=3, W=1 derives G=3 and then fails), and each assertion's exact text.
#include <gtest/gtest.h>

#include <optional>

#include "config/config_test_helpers.h"

namespace deepshard::config {
namespace batch_size_test {

using namespace deepshard::config::testing;
using nlohmann::json;

struct Row {
  std::optional<int64_t> t, m, g;
  int64_t world;
  int64_t want_t, want_m, want_g;
};

json triple(std::optional<int64_t> t, std::optional<int64_t> m, std::optional<int64_t> g) {
  json j = json::object();
  if (t) j["train_batch_size"] = *t;
  if (m) j["train_micro_batch_size_per_gpu"] = *m;
  if (g) j["gradient_accumulation_steps"] = *g;
  return j;
}

TEST(BatchTriple, DerivesTheMissingValuesAsDeepSpeed) {
  const std::optional<int64_t> none;
  const Row rows[] = {
      {16, 4, 2, 2, 16, 4, 2},        // T, M, G: nothing derived
      {16, 4, none, 2, 16, 4, 2},     // T, M: G = (T // M) // W
      {16, none, 2, 2, 16, 4, 2},     // T, G: M = (T // W) // G
      {none, 4, 2, 2, 16, 4, 2},      // M, G: T = M * G * W
      {16, none, none, 2, 16, 8, 1},  // T only: G = 1, M = T // W
      {none, 4, none, 3, 12, 4, 1},   // M only: G = 1, T = M * W
      {24, 4, none, 3, 24, 4, 2},    {48, none, 4, 3, 48, 4, 4},
  };
  for (const Row& r : rows) {
    Parsed p = parse_ok(triple(r.t, r.m, r.g), context(r.world));
    EXPECT_EQ(p.config.train_batch_size, r.want_t) << triple(r.t, r.m, r.g).dump();
    EXPECT_EQ(p.config.train_micro_batch_size_per_gpu, r.want_m) << triple(r.t, r.m, r.g).dump();
    EXPECT_EQ(p.config.gradient_accumulation_steps, r.want_g) << triple(r.t, r.m, r.g).dump();
  }
}

TEST(BatchTriple, FloorDivisionThenEqualityCheck) {
  // T=10, M=3, W=1: G = 10 // 3 = 3, and 3 * 3 * 1 != 10.
  EXPECT_EQ(parse_error(triple(10, 3, std::nullopt), context(1)),
            "test.json: train_batch_size: Check batch related parameters. train_batch_size is not "
            "equal to micro_batch_per_gpu * gradient_acc_step * world_size 10 != 3 * 3 * 1");
  EXPECT_EQ(parse_error(triple(16, 4, 2), context(1)),
            "test.json: train_batch_size: Check batch related parameters. train_batch_size is not "
            "equal to micro_batch_per_gpu * gradient_acc_step * world_size 16 != 4 * 2 * 1");
  // T=10, W=4: M = 10 // 4 = 2, 2 * 1 * 4 != 10.
  EXPECT_EQ(parse_error(triple(10, std::nullopt, std::nullopt), context(4)),
            "test.json: train_batch_size: Check batch related parameters. train_batch_size is not "
            "equal to micro_batch_per_gpu * gradient_acc_step * world_size 10 != 2 * 1 * 4");
}

TEST(BatchTriple, NeitherTrainNorMicroBatchSize) {
  const std::string message =
      "test.json: train_batch_size: Either train_batch_size or train_micro_batch_size_per_gpu "
      "needs to be provided";
  EXPECT_EQ(parse_error(json::object()), message);
  EXPECT_EQ(parse_error(triple(std::nullopt, std::nullopt, 4)), message);
  // null is DeepSpeed's None: not given.
  EXPECT_EQ(parse_error({{"train_batch_size", nullptr}}), message);
}

TEST(BatchTriple, PositivityAssertions) {
  EXPECT_EQ(parse_error(triple(0, std::nullopt, std::nullopt)),
            "test.json: train_batch_size: Train batch size: 0 has to be greater than 0\n"
            "test.json: train_micro_batch_size_per_gpu: Micro batch size per gpu: 0 has to be "
            "greater than 0");
  // T=1, W=2: M = 1 // 2 = 0.
  EXPECT_EQ(parse_error(triple(1, std::nullopt, std::nullopt), context(2)),
            "test.json: train_micro_batch_size_per_gpu: Micro batch size per gpu: 0 has to be "
            "greater than 0");
  EXPECT_EQ(parse_error(triple(8, 8, 0)),
            "test.json: gradient_accumulation_steps: Gradient accumulation steps: 0 has to be "
            "greater than 0");
  // T, M with M = 0 cannot divide: reported as DeepSpeed's micro batch assertion.
  EXPECT_EQ(parse_error(triple(8, 0, std::nullopt)),
            "test.json: train_micro_batch_size_per_gpu: Micro batch size per gpu: 0 has to be "
            "greater than 0");
  // Python floor division of negatives: -4 // 3 = -2.
  EXPECT_EQ(parse_error(triple(-4, std::nullopt, std::nullopt), context(3)),
            "test.json: train_batch_size: Train batch size: -4 has to be greater than 0\n"
            "test.json: train_micro_batch_size_per_gpu: Micro batch size per gpu: -2 has to be "
            "greater than 0");
}

TEST(BatchTriple, IntegralFloatsCount) {
  Parsed p = parse_ok({{"train_batch_size", 32.0}, {"gradient_accumulation_steps", 2}}, context(4));
  EXPECT_EQ(p.config.train_micro_batch_size_per_gpu, 4);
}

}  // namespace batch_size_test
}  // namespace deepshard::config
