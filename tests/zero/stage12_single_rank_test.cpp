// Stages 1 and 2 on one rank (shard = everything) against stage 0 on the same model and batches:
// same gradient norms and parameters step by step, with accumulation and clipping, and the ledger
// entries the sharded engine adds (master shard, gradient shard, receive buffers).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "deepshard/comm/group.h"
#include "deepshard/models/gpt.h"
#include "deepshard/zero/engine.h"

namespace deepshard::zero {
namespace stage12_single_rank_test {

models::GptConfig stage12_tiny() {
  models::GptConfig c;
  c.n_layer = 2;
  c.n_head = 3;
  c.n_embd = 33;  // odd sizes: buckets of odd length
  c.block_size = 16;
  c.vocab_size = 64;
  return c;
}

// The zero_optimization switches the variants below turn off (DeepSpeed's defaults are on).
struct Variant {
  bool reduce_scatter = true;
  bool contiguous_gradients = true;
};

config::DsConfig ds_config(int stage, bool overlap, Variant variant = {}) {
  config::DsConfig c;
  c.train_micro_batch_size_per_gpu = 4;
  c.gradient_accumulation_steps = 3;
  c.train_batch_size = 12;
  c.gradient_clipping = 0.5;
  c.optimizer.type = "AdamW";
  c.optimizer.lr = 3e-3;
  c.optimizer.betas = {0.9, 0.95};
  c.optimizer.weight_decay = 0.1;
  c.zero.stage = stage;
  c.zero.overlap_comm = overlap;
  c.zero.reduce_bucket_size = 1000;  // several buckets
  c.zero.reduce_scatter = variant.reduce_scatter;
  c.zero.contiguous_gradients = variant.contiguous_gradients;
  return c;
}

at::Tensor flat_parameters(models::Gpt& model) {
  std::vector<at::Tensor> all;
  for (const auto& p : model->parameters()) all.push_back(p.detach().flatten());
  return torch::cat(all);
}

void expect_matches_stage0(int stage, bool overlap, Variant variant = {}) {
  auto group = comm::Group::create(comm::RendezvousInfo{}, std::chrono::seconds(10));
  models::Gpt ref(stage12_tiny(), 7), ours(stage12_tiny(), 7);
  auto ref_engine = Engine::initialize(ref.ptr(), ds_config(0, false), *group);
  auto engine = Engine::initialize(ours.ptr(), ds_config(stage, overlap, variant), *group);
  bool clipped = false;
  for (int64_t step = 0; step < 6; ++step) {
    for (int64_t m = 0; m < 3; ++m) {
      auto gen = at::make_generator<at::CPUGeneratorImpl>(100 + step * 10 + m);
      auto x = torch::randint(0, 64, {4, 17}, gen, torch::kLong);
      auto in = x.narrow(1, 0, 16).contiguous(), target = x.narrow(1, 1, 16).contiguous();
      ref_engine->backward(ref->loss(in, target));
      engine->backward(ours->loss(in, target));
      const StepResult r0 = ref_engine->step(), r = engine->step();
      ASSERT_EQ(r.boundary, r0.boundary);
      if (!r.boundary) continue;
      EXPECT_NEAR(r.grad_norm, r0.grad_norm, 1e-6 * r0.grad_norm) << "step " << step;
      clipped = clipped || r0.grad_norm > 0.5;
      const double diff = (flat_parameters(ours) - flat_parameters(ref)).abs().max().item<double>();
      EXPECT_LT(diff, 1e-6) << "step " << step;
    }
  }
  EXPECT_TRUE(clipped) << "clipping never took effect";

  const int64_t n = engine->num_parameters(), bytes = 4 * n;  // one rank: no padding
  ASSERT_EQ(n, ref_engine->num_parameters());
  const MemoryLedger& ledger = engine->ledger();
  EXPECT_EQ(ledger.bytes(MemoryCategory::kParameters), bytes);
  // Stage 1: the full gradient buffer and the reduced shard; stage 2: the shard only.
  EXPECT_EQ(ledger.bytes(MemoryCategory::kGradients), (stage == 1 ? 2 : 1) * bytes);
  // fp32 parameters: the owned slices of the parameter buffer are the master weights.
  EXPECT_EQ(ledger.bytes(MemoryCategory::kMasterWeights), 0);
  EXPECT_EQ(ledger.bytes(MemoryCategory::kOptimizerState),
            ref_engine->ledger().bytes(MemoryCategory::kOptimizerState));
  // Stage 2 keeps one bucket-sized staging buffer and (accumulation > 1) one receive buffer per
  // reduction in flight, each as large as the largest bucket (its slice, at N = 1 all of it): an
  // MLP matrix (4 * 33 * 33 > reduce_bucket_size, a bucket alone).
  const int64_t comm = ledger.bytes(MemoryCategory::kCommBuffers);
  const int64_t buffers = stage == 1 ? 0 : variant.reduce_scatter ? 2 : 1;  // no receive buffers
  EXPECT_EQ(comm, buffers * (overlap ? 2 : 1) * 4 * (4 * 33 * 33));
  // Stage 2 leaves no gradient in the parameters: each was copied out and released.
  if (stage == 2) {
    for (const auto& p : ours->parameters()) EXPECT_FALSE(p.grad().defined());
  }
}

TEST(Stage12SingleRank, Stage1MatchesStage0) { expect_matches_stage0(1, false); }
TEST(Stage12SingleRank, Stage2MatchesStage0) { expect_matches_stage0(2, false); }
TEST(Stage12SingleRank, Stage2WithOverlapMatchesStage0) { expect_matches_stage0(2, true); }
TEST(Stage12SingleRank, AllReduceInsteadOfReduceScatterMatchesStage0) {
  expect_matches_stage0(1, false, {.reduce_scatter = false});
  expect_matches_stage0(2, true, {.reduce_scatter = false});
}
TEST(Stage12SingleRank, Stage2WithoutContiguousGradientsMatchesStage0) {
  expect_matches_stage0(2, true, {.contiguous_gradients = false});
}

}  // namespace stage12_single_rank_test
}  // namespace deepshard::zero
