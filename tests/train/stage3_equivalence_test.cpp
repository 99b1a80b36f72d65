// ZeRO stage 3 reproduces single-process training: `deepshard train` with N = 2, 3 and 4 real
// ranks (fp32, same seed, same global batch 72) gives the losses of the single-rank stage-0 run for
// 20 steps within 1e-4 relative, with gradient accumulation 1 and 2 and clipping on, prefetch off
// and on, the blocks released after use (persistence threshold 0) or kept (a large threshold, or
// capped by stage3_model_persistence_threshold), reuse distances 0, root + 1 and 1e9, a small
// stage3_max_live_parameters, overlap_comm on (reductions in flight during backward) and off, and
// a parameter count not divisible by N. The summaries show the partitioned model states and the
// bound on gathered parameters.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "support/test_support.h"
#include "train/run_helpers.h"

namespace deepshard::testing {
namespace stage3_equivalence_test {

constexpr int64_t kGlobalBatch = 72;  // divisible by N * accumulation for N in {1..4}, {1, 2}

struct Stage3Knobs {
  int64_t persistence = 0;
  int64_t model_persistence = INT64_MAX;
  int64_t prefetch_bucket = 0;  // 0: no prefetch
  int64_t max_live = 1'000'000'000;
  int64_t reuse = 0;         // stage3_max_reuse_distance (DeepSpeed's default is 1e9)
  bool overlap_comm = true;  // stage 3's default: reductions run on during backward
};

// The config sections (merged over the tiny run config) of a stage-3 run.
std::string stage3_section(const Stage3Knobs& knobs, const std::string& model = "",
                           int64_t sample_tokens = 0) {
  nlohmann::json extra = {{"zero_optimization",
                           {{"stage", 3},
                            {"stage3_param_persistence_threshold", knobs.persistence},
                            {"stage3_prefetch_bucket_size", knobs.prefetch_bucket},
                            {"stage3_max_live_parameters", knobs.max_live},
                            {"stage3_max_reuse_distance", knobs.reuse},
                            {"overlap_comm", knobs.overlap_comm}}}};
  if (knobs.model_persistence != INT64_MAX)
    extra["zero_optimization"]["stage3_model_persistence_threshold"] = knobs.model_persistence;
  if (!model.empty()) extra["model"] = nlohmann::json::parse(model);
  if (sample_tokens > 0) extra["train"] = {{"sample_tokens", sample_tokens}};
  return extra.dump();
}

int64_t ledger(const nlohmann::json& summary, const std::string& category) {
  return summary.at("ledger_bytes_rank0").at(category).get<int64_t>();
}

// The tiny GPT's units: two blocks of 49984 elements and the root (embeddings, ln_f).
constexpr int64_t kTinyBlock = 12 * 64 * 64 + 13 * 64;

int64_t padded(int64_t numel, int ranks) { return (numel + ranks - 1) / ranks * ranks; }

// One run per (N, accumulation), each with other knobs (the trace is h.0 h.1 root h.1 h.0):
//   N=2: blocks released after use (no prefetch, reuse distance 0) / prefetch on and DeepSpeed's
//        reuse distance 1e9 (every block kept from its forward to its backward);
//   N=3: persistence threshold large but stage3_model_persistence_threshold one block (h.0
//        persistent, h.1 released) / prefetch on, reuse distance just above the root (h.1 kept
//        across the root, h.0 released);
//   N=4: released after use, no prefetch / prefetch on, every block persistent.
TEST(Stage3Equivalence, ReproducesSingleRankLosses) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  auto reference = train_and_read_losses(dir, data, 1, kGlobalBatch, 1, "ref");
  ASSERT_EQ(reference.losses.size(), 20u);
  EXPECT_LT(reference.losses.back(), reference.losses.front()) << "the loss did not fall";
  EXPECT_TRUE(reference.clipped) << "gradient clipping never took effect";
  const auto ref_summary = read_summary(dir, "ref");
  const int64_t params = ref_summary.at("num_parameters");
  const int64_t root = params - 2 * kTinyBlock;
  for (int ranks : {2, 3, 4}) {
    for (int gas : {1, 2}) {
      Stage3Knobs knobs;
      std::string what;
      int64_t persistent_blocks = 0, peak_blocks = 1;    // gathered besides the root
      if (gas == 2) knobs.prefetch_bucket = 50'000'000;  // DeepSpeed's default
      if (ranks == 2 && gas == 1) {
        what = "released after use";
      } else if (ranks == 2) {
        knobs.reuse = 1'000'000'000;
        what = "prefetch, reuse distance 1e9";
        peak_blocks = 2;
      } else if (ranks == 3 && gas == 1) {
        knobs.persistence = 1'000'000;
        knobs.model_persistence = kTinyBlock + 10'000;
        what = "model persistence threshold: one persistent block";
        persistent_blocks = 1;
        peak_blocks = 2;
      } else if (ranks == 3) {
        knobs.reuse = root + 1;
        knobs.overlap_comm = false;  // each reduction completes before backward goes on
        what = "prefetch, reuse distance root + 1, no overlap_comm";
        peak_blocks = 2;  // prefetch: h.1 while h.0 runs
      } else if (gas == 1) {
        what = "released after use";
      } else {
        knobs.persistence = 1'000'000;
        what = "prefetch, persistent blocks";
        persistent_blocks = peak_blocks = 2;
      }
      const std::string name = "s3_n" + std::to_string(ranks) + "_gas" + std::to_string(gas);
      const bool sample = ranks == 2 && gas == 1;
      auto run = train_and_read_losses(dir, data, ranks, kGlobalBatch / (ranks * gas), gas, name,
                                       stage3_section(knobs, "", sample ? 16 : 0));
      expect_same_losses(run, reference,
                         "stage 3, " + std::to_string(ranks) + " ranks, accumulation " +
                             std::to_string(gas) + ", " + what);
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
      // Gathered after the run: the root and the persistent blocks; at the peak, the blocks the
      // knobs allow at once.
      const int64_t gathered_root = 4 * padded(root, ranks);
      const int64_t block_bytes = 4 * padded(kTinyBlock, ranks);
      EXPECT_EQ(ledger(summary, "gathered_params"), gathered_root + persistent_blocks * block_bytes)
          << what;
      EXPECT_EQ(summary.at("ledger_peak_bytes_rank0").at("gathered_params").get<int64_t>(),
                gathered_root + peak_blocks * block_bytes)
          << what;
      if (sample) {
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
// threshold above a block's size); at N = 4 they are released and prefetched with
// stage3_max_live_parameters a little above one block (48447 elements): the rank-0 ledger's peak
// of gathered elements stays within the running block plus that limit (persistent root aside).
TEST(Stage3Equivalence, ParameterCountNotDivisibleByN) {
  const std::string model = R"({"n_embd": 63, "n_head": 3, "vocab_size": 257})";
  TempDir dir;
  const std::string data = make_token_file(dir);
  auto reference =
      train_and_read_losses(dir, data, 1, kGlobalBatch, 1, "ref",
                            nlohmann::json{{"model", nlohmann::json::parse(model)}}.dump());
  ASSERT_EQ(reference.losses.size(), 20u);
  const int64_t params = read_summary(dir, "ref").at("num_parameters");
  constexpr int64_t kBlock = 48447, kMaxLive = 50000;
  for (int ranks : {2, 4}) {
    EXPECT_NE(params % ranks, 0) << params << " parameters divide by " << ranks;
    const Stage3Knobs knobs =
        ranks == 2 ? Stage3Knobs{.persistence = 1'000'000}
                   : Stage3Knobs{.prefetch_bucket = 50'000'000, .max_live = kMaxLive};
    const std::string name = "odd_n" + std::to_string(ranks);
    auto run = train_and_read_losses(dir, data, ranks, kGlobalBatch / (ranks * 2), 2, name,
                                     stage3_section(knobs, model));
    expect_same_losses(run, reference,
                       "stage 3, " + std::to_string(params) + " parameters, " +
                           std::to_string(ranks) + " ranks, accumulation 2" +
                           (ranks == 2 ? ", persistent blocks" : ", prefetch, max live 50000"));
    const auto summary = read_summary(dir, name);
    EXPECT_EQ(summary.at("num_parameters"), params);
    const int64_t gathered = ledger(summary, "gathered_params");
    if (ranks == 2) {  // every unit stays gathered
      EXPECT_GE(gathered, 4 * params);
      continue;
    }
    // After the run only the root is gathered; the peak beyond it is the running block plus at
    // most kMaxLive elements: here exactly two padded blocks (prefetch one ahead).
    EXPECT_LT(gathered, 4 * params / 2);
    const int64_t peak = summary.at("ledger_peak_bytes_rank0").at("gathered_params");
    const int64_t padded_block = (kBlock + ranks - 1) / ranks * ranks;
    EXPECT_LE(peak - gathered, 4 * (padded_block + kMaxLive));
    EXPECT_EQ(peak - gathered, 4 * 2 * padded_block) << "prefetch did not gather ahead";
    std::printf("gathered bytes rank 0: root %lld, peak %lld (bound: root + %lld)\n",
                static_cast<long long>(gathered), static_cast<long long>(peak),
                static_cast<long long>(4 * (padded_block + kMaxLive)));
  }
}

// bf16 at stage 3 (bf16 gathered parameters and activations, fp32 master shard and gradient
// shard): 2 ranks, accumulation 2, prefetch on, give the bf16 stage-0 losses of the same ranks
// within 1e-5 (the same bf16 forward, fp32 sums of the same bf16 gradients, the same Adam). The
// reduction runs in fp32 on both sides (communication_data_type fp32; DeepSpeed's default for bf16
// is a bf16 wire, whose rounding differs between all-reduce and reduce-scatter: WireFormat tests
// it).
TEST(Stage3Equivalence, Bf16EqualsBf16Stage0) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  const std::string bf16 = R"({"bf16": {"enabled": true}, "communication_data_type": "fp32"})";
  auto reference = train_and_read_losses(dir, data, 2, kGlobalBatch / 4, 2, "bf16_s0", bf16);
  ASSERT_EQ(reference.losses.size(), 20u);
  nlohmann::json extra = nlohmann::json::parse(stage3_section({.prefetch_bucket = 50'000'000}));
  extra["bf16"] = {{"enabled", true}};
  extra["communication_data_type"] = "fp32";
  auto run = train_and_read_losses(dir, data, 2, kGlobalBatch / 4, 2, "bf16_s3", extra.dump());
  ASSERT_EQ(run.losses.size(), 20u);
  double max_rel = 0;
  for (size_t i = 0; i < run.losses.size(); ++i) {
    const double rel = std::abs(run.losses[i] - reference.losses[i]) / reference.losses[i];
    max_rel = std::max(max_rel, rel);
    EXPECT_LT(rel, 1e-5) << "bf16 stage 3 vs bf16 stage 0, step " << i + 1;
  }
  std::printf("bf16 stage 3, N = 2: max relative loss difference %.2e to bf16 stage 0\n", max_rel);
  // bf16 shard (2 bytes per owned element) and its fp32 master (4 bytes).
  const auto summary = read_summary(dir, "bf16_s3");
  const int64_t params = summary.at("num_parameters");
  const int64_t shard = ledger(summary, "parameters") / 2;
  EXPECT_GE(2 * shard, params);
  EXPECT_LT(2 * shard, params + 3 * 2);
  EXPECT_EQ(ledger(summary, "master_weights"), 4 * shard);
  EXPECT_EQ(ledger(summary, "gradients"), 4 * shard);
}

}  // namespace stage3_equivalence_test
}  // namespace deepshard::testing
