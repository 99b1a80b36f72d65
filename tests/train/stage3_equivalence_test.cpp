// ZeRO stage 3 reproduces single-process training: `deepshard train` with N = 2, 3 and 4 real
// ranks (fp32, same seed, same global batch 72) gives the losses of the single-rank stage-0 run for
// 20 steps within 1e-4 relative, with gradient accumulation 1 and 2 and clipping on, the blocks
// released after use (persistence threshold 0) or kept (a large threshold), and for a model whose
// parameter count is not divisible by N. The summaries show the partitioned model states.
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "support/test_support.h"
#include "train/run_helpers.h"

namespace deepshard::testing {
namespace {

constexpr int64_t kGlobalBatch = 72;  // divisible by N * accumulation for N in {1..4}, {1, 2}

nlohmann::json read_summary(const TempDir& dir, const std::string& name) {
  return nlohmann::json::parse(read_file(dir.file("run_" + name) + "/summary.json"));
}

std::string stage3_section(int64_t persistence, const std::string& model = "",
                           int64_t sample_tokens = 0) {
  nlohmann::json extra = {
      {"zero_optimization", {{"stage", 3}, {"stage3_param_persistence_threshold", persistence}}}};
  if (!model.empty()) extra["model"] = nlohmann::json::parse(model);
  if (sample_tokens > 0) extra["train"] = {{"sample_tokens", sample_tokens}};
  return extra.dump();
}

int64_t ledger(const nlohmann::json& summary, const std::string& category) {
  return summary.at("ledger_bytes_rank0").at(category).get<int64_t>();
}

TEST(Stage3Equivalence, ReproducesSingleRankLosses) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  auto reference = train_and_read_losses(dir, data, 1, kGlobalBatch, 1, "ref");
  ASSERT_EQ(reference.losses.size(), 20u);
  EXPECT_LT(reference.losses.back(), reference.losses.front()) << "the loss did not fall";
  EXPECT_TRUE(reference.clipped) << "gradient clipping never took effect";
  const auto ref_summary = read_summary(dir, "ref");
  const int64_t params = ref_summary.at("num_parameters");
  for (int ranks : {2, 3, 4}) {
    for (int gas : {1, 2}) {
      const std::string name = "s3_n" + std::to_string(ranks) + "_gas" + std::to_string(gas);
      auto run = train_and_read_losses(dir, data, ranks, kGlobalBatch / (ranks * gas), gas, name,
                                       stage3_section(0, "", ranks == 2 && gas == 1 ? 16 : 0));
      expect_same_losses(
          run, reference,
          "stage 3, " + std::to_string(ranks) + " ranks, accumulation " + std::to_string(gas));
      // Model states per rank: parameters, gradients and Adam state are 1/N of stage 0's (plus
      // padding: < N elements per unit, 3 units here).
      const auto summary = read_summary(dir, name);
      EXPECT_EQ(summary.at("num_parameters"), params);
      const int64_t shard_bytes = ledger(summary, "parameters");
      EXPECT_GE(shard_bytes * ranks, 4 * params);
      EXPECT_LT(shard_bytes * ranks, 4 * (params + 3 * ranks));
      EXPECT_EQ(ledger(summary, "gradients"), shard_bytes);
      EXPECT_EQ(ledger(summary, "optimizer_state"), 2 * shard_bytes);
      EXPECT_EQ(ledger(summary, "master_weights"), 0);  // fp32: the shard is the master
      if (ranks == 2 && gas == 1) {
        // Sampling after training runs a forward on every rank (it gathers collectively).
        EXPECT_TRUE(summary.contains("sample")) << run.output;
        std::printf("model-state bytes rank 0: stage 0 %lld, stage 3 at N = 2: %lld\n",
                    static_cast<long long>(ledger(ref_summary, "model_states")),
                    static_cast<long long>(ledger(summary, "model_states")));
      }
    }
  }
}

// n_embd 63 and a vocabulary of 257: 115227 parameters (odd), so no unit divides evenly by 2 or 4
// and every unit's flat storage carries padding. At N = 2 the blocks stay gathered (persistence
// threshold above a block's size), at N = 4 they are released.
TEST(Stage3Equivalence, ParameterCountNotDivisibleByN) {
  const std::string model = R"({"n_embd": 63, "n_head": 3, "vocab_size": 257})";
  TempDir dir;
  const std::string data = make_token_file(dir);
  auto reference =
      train_and_read_losses(dir, data, 1, kGlobalBatch, 1, "ref",
                            R"({"model": {"n_embd": 63, "n_head": 3, "vocab_size": 257}})");
  ASSERT_EQ(reference.losses.size(), 20u);
  const int64_t params = read_summary(dir, "ref").at("num_parameters");
  for (int ranks : {2, 4}) {
    EXPECT_NE(params % ranks, 0) << params << " parameters divide by " << ranks;
    const int64_t persistence = ranks == 2 ? 1'000'000 : 0;
    const std::string name = "odd_n" + std::to_string(ranks);
    auto run = train_and_read_losses(dir, data, ranks, kGlobalBatch / (ranks * 2), 2, name,
                                     stage3_section(persistence, model));
    expect_same_losses(run, reference,
                       "stage 3, " + std::to_string(params) + " parameters, " +
                           std::to_string(ranks) + " ranks, accumulation 2, persistence " +
                           std::to_string(persistence));
    const auto summary = read_summary(dir, name);
    EXPECT_EQ(summary.at("num_parameters"), params);
    const int64_t gathered = ledger(summary, "gathered_params");
    // After the run: every unit gathered (persistent), or only the root.
    if (persistence > 0) {
      EXPECT_GE(gathered, 4 * params);
    } else {
      EXPECT_LT(gathered, 4 * params / 2);
    }
  }
}

}  // namespace
}  // namespace deepshard::testing
