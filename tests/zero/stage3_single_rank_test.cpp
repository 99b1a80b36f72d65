// Stage 3 on one rank against stage 0 on the same model and batches: the units are really
// released after their forward (their storage freed) and re-gathered before their backward, and
// the gradient norms and parameters equal stage 0's step by step, with accumulation and clipping,
// and with the blocks persistent; the ledger shows the shard, gradient shard, Adam state and the
// gathered peak; evaluation without grad works.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "deepshard/comm/group.h"
#include "deepshard/models/gpt.h"
#include "deepshard/zero/engine.h"

namespace deepshard::zero {
namespace stage3_single_rank_test {

models::GptConfig stage3_tiny() {
  models::GptConfig c;
  c.n_layer = 3;
  c.n_head = 3;
  c.n_embd = 33;
  c.block_size = 16;
  c.vocab_size = 64;
  return c;
}

// How the stage-3 run is configured, and how many blocks (besides the root) may be gathered at
// once: 1 without prefetch, 1 + max_live_parameters / block with it.
struct Case {
  int64_t persistence = 0;
  int64_t model_persistence_blocks = 100;  // stage3_model_persistence_threshold in blocks (+ 1)
  int64_t prefetch_bucket = 0;
  int64_t max_live_blocks = 0;  // stage3_max_live_parameters in blocks
  int64_t reuse = 0;            // stage3_max_reuse_distance; < 0: the root's elements + 1
  int64_t peak_blocks = 1;
  int64_t persistent_blocks = 0;  // the first blocks stay gathered
  int64_t kept_blocks = 0;        // the last blocks stay gathered from forward to backward
};

config::DsConfig ds_config(int stage, const Case& kase = {}, int64_t block = 0, int64_t root = 0) {
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
  c.zero.param_persistence_threshold = kase.persistence;
  c.zero.prefetch_bucket_size = kase.prefetch_bucket;
  c.zero.max_live_parameters = kase.max_live_blocks * block;
  c.zero.model_persistence_threshold = kase.model_persistence_blocks * block + 1;
  c.zero.max_reuse_distance = kase.reuse < 0 ? root + 1 : kase.reuse;
  return c;
}

std::pair<at::Tensor, at::Tensor> batch(int64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  auto x = torch::randint(0, 64, {4, 17}, gen, torch::kLong);
  return {x.narrow(1, 0, 16).contiguous(), x.narrow(1, 1, 16).contiguous()};
}

void expect_matches_stage0(const Case& kase) {
  auto group = comm::Group::create(comm::RendezvousInfo{}, std::chrono::seconds(10));
  models::Gpt ref(stage3_tiny(), 7), ours(stage3_tiny(), 7);
  int64_t block = 0;  // elements of one block (N = 1: no padding)
  for (const auto& p : ours->blocks[0]->parameters()) block += p.numel();
  int64_t root = -3 * block;  // the elements outside the blocks
  for (const auto& p : ours->parameters()) root += p.numel();
  auto ref_engine = Engine::initialize(ref.ptr(), ds_config(0), *group);
  auto engine = Engine::initialize(ours.ptr(), ds_config(3, kase, block, root), *group);
  // Whether block b holds storage: the persistent ones always, the last kept_blocks also from
  // their forward to their backward once the trace is recorded (after the first micro-step).
  auto expect_gathered = [&](bool after_forward, bool following, const char* when) {
    for (int64_t b = 0; b < 3; ++b) {
      const bool want =
          b < kase.persistent_blocks || (after_forward && following && b >= 3 - kase.kept_blocks);
      EXPECT_EQ(ours->blocks[b]->mlp->c_fc->weight.storage().nbytes() > 0, want)
          << "block " << b << " " << when;
    }
  };
  // After initialisation a released block has no storage, the root (embeddings) keeps its own.
  expect_gathered(false, false, "after initialisation");
  EXPECT_GT(ours->wte->weight.storage().nbytes(), 0u);
  bool clipped = false;
  for (int64_t step = 0; step < 5; ++step) {
    for (int64_t m = 0; m < 3; ++m) {
      auto [in, target] = batch(100 + step * 10 + m);
      ref_engine->backward(ref->loss(in, target));
      const at::Tensor loss = ours->loss(in, target);
      // (With prefetch, the blocks before the last are gathered again for the backward.)
      if (kase.prefetch_bucket == 0) expect_gathered(true, step + m > 0, "after forward");
      engine->backward(loss);
      expect_gathered(false, true, "after backward");
      EXPECT_FALSE(ours->blocks[1]->mlp->c_fc->weight.grad().defined())
          << "the full gradient was not dropped";
      const StepResult r0 = ref_engine->step(), r = engine->step();
      ASSERT_EQ(r.boundary, r0.boundary);
      if (!r.boundary) continue;
      EXPECT_NEAR(r.grad_norm, r0.grad_norm, 1e-6 * r0.grad_norm) << "step " << step;
      clipped = clipped || r0.grad_norm > 0.5;
      // The updated parameters, through an evaluation forward (which gathers every block).
      torch::NoGradGuard no_grad;
      auto [eval_in, eval_target] = batch(1);
      const double ref_loss = ref->loss(eval_in, eval_target).item<double>();
      EXPECT_NEAR(ours->loss(eval_in, eval_target).item<double>(), ref_loss, 1e-6 * ref_loss)
          << "step " << step;
      expect_gathered(false, true, "after evaluation");
    }
  }
  EXPECT_TRUE(clipped) << "clipping never took effect";

  const MemoryLedger& ledger = engine->ledger();
  const int64_t n = engine->num_parameters();
  ASSERT_EQ(n, ref_engine->num_parameters());
  EXPECT_EQ(ledger.bytes(MemoryCategory::kParameters), 4 * n);  // one rank: no padding
  EXPECT_EQ(ledger.bytes(MemoryCategory::kGradients), 4 * n);   // the fp32 shard only
  EXPECT_EQ(ledger.bytes(MemoryCategory::kMasterWeights), 0);   // fp32: the shard is the master
  EXPECT_EQ(ledger.bytes(MemoryCategory::kOptimizerState), 8 * n);
  // Accumulation > 1: one receive buffer as large as the largest unit (a block).
  EXPECT_EQ(ledger.bytes(MemoryCategory::kCommBuffers), 4 * block);
  // Gathered: the root always; the running block and what prefetch may add (never more than
  // stage3_max_live_parameters beyond the running block) when blocks are released.
  ASSERT_EQ(n, root + 3 * block);
  EXPECT_EQ(ledger.bytes(MemoryCategory::kGatheredParams),
            4 * (root + kase.persistent_blocks * block));
  EXPECT_EQ(ledger.peak_bytes(MemoryCategory::kGatheredParams),
            4 * (root + kase.peak_blocks * block));
}

TEST(Stage3SingleRank, ReleasedBlocksMatchStage0) { expect_matches_stage0({}); }
TEST(Stage3SingleRank, PersistentBlocksMatchStage0) {
  expect_matches_stage0({.persistence = 1'000'000, .peak_blocks = 3, .persistent_blocks = 3});
}
// stage3_model_persistence_threshold caps the persistent total: two blocks fit, the third is
// released after use.
TEST(Stage3SingleRank, ModelPersistenceThresholdCapsPersistentBlocks) {
  expect_matches_stage0({.persistence = 1'000'000,
                         .model_persistence_blocks = 2,
                         .peak_blocks = 3,
                         .persistent_blocks = 2});
}
// stage3_max_reuse_distance: the trace is h.0 h.1 h.2 root h.2 h.1 h.0. A distance just above the
// root's elements keeps h.2 from its forward to its backward (only the root in between), the
// others are released; a large one (and a large max-live) keeps every block through the forward.
TEST(Stage3SingleRank, ReuseDistanceKeepsTheLastBlock) {
  expect_matches_stage0({.max_live_blocks = 100, .reuse = -1, .kept_blocks = 1});
}
TEST(Stage3SingleRank, LargeReuseDistanceKeepsEveryBlock) {
  expect_matches_stage0(
      {.max_live_blocks = 100, .reuse = 1'000'000'000, .peak_blocks = 3, .kept_blocks = 3});
}
// ... unless stage3_max_live_parameters does not allow it.
TEST(Stage3SingleRank, MaxLiveParametersLimitsReuse) {
  expect_matches_stage0({.max_live_blocks = 0, .reuse = 1'000'000'000});
}
// Prefetch gathers the next block while one runs, up to one block beyond it...
TEST(Stage3SingleRank, PrefetchWithinMaxLiveParametersMatchesStage0) {
  expect_matches_stage0({.prefetch_bucket = 1'000'000, .max_live_blocks = 1, .peak_blocks = 2});
}
// ... or all three at the first block's fetch when nothing limits it.
TEST(Stage3SingleRank, UnlimitedPrefetchMatchesStage0) {
  expect_matches_stage0({.prefetch_bucket = 1'000'000, .max_live_blocks = 100, .peak_blocks = 3});
}

}  // namespace stage3_single_rank_test
}  // namespace deepshard::zero
