// zero.Init (PartitionedBuild): a GPT built block by block with each block partitioned as soon as
// it exists has, once the stage-3 engine has adopted its units, exactly the weights of the normal
// construction with the same seed; no more than one block is ever held in full during the build,
// and after it every block is released. Another stage refuses such a model.
#include "deepshard/zero/partitioned_build.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "deepshard/comm/group.h"
#include "deepshard/models/gpt.h"
#include "deepshard/util/error.h"
#include "deepshard/zero/engine.h"

namespace deepshard::zero {
namespace partitioned_build_test {

models::GptConfig small_gpt() {
  models::GptConfig c;
  c.n_layer = 4;
  c.n_head = 2;
  c.n_embd = 32;
  c.block_size = 16;
  c.vocab_size = 64;
  return c;
}

config::DsConfig stage(int s) {
  config::DsConfig c;
  c.train_micro_batch_size_per_gpu = 2;
  c.train_batch_size = 2;
  c.gradient_accumulation_steps = 1;
  c.optimizer.type = "AdamW";
  c.zero.stage = s;
  c.zero.param_persistence_threshold = 0;
  return c;
}

TEST(PartitionedBuild, SameWeightsAsNormalConstructionOneBlockAtATime) {
  auto group = comm::Group::create(comm::RendezvousInfo{}, std::chrono::seconds(10));
  models::Gpt normal(small_gpt(), 7);
  PartitionedBuild build(*group, at::kFloat);
  models::Gpt built(small_gpt(), 7, build.block_hook());
  int64_t block_bytes = 0;  // one rank: no padding
  for (const auto& p : normal->blocks[0]->parameters()) block_bytes += 4 * p.numel();
  EXPECT_EQ(build.peak_full_bytes(), block_bytes);
  for (const auto& block : built->blocks) {
    EXPECT_EQ(block->mlp->c_fc->weight.storage().nbytes(), 0u) << "a block kept its storage";
  }
  EXPECT_GT(built->wte->weight.storage().nbytes(), 0u);  // the root is built as usual

  auto engine = Engine::initialize(built.ptr(), stage(3), *group, &build);
  EXPECT_EQ(engine->num_parameters(), normal->num_parameters());
  const auto expected = normal->named_parameters();
  engine->with_full_parameters([&] {
    for (const auto& item : built->named_parameters()) {
      EXPECT_TRUE(torch::equal(item.value(), expected[item.key()])) << item.key();
    }
  });
  EXPECT_EQ(built->blocks[2]->attn->c_attn->weight.storage().nbytes(), 0u) << "not released";
  // Training forwards gather the adopted units: the loss is the normal model's.
  auto x = torch::randint(0, 64, {2, 16}, torch::kLong);
  EXPECT_NEAR(built->loss(x, x).item<double>(), normal->loss(x, x).item<double>(), 1e-6);
}

TEST(PartitionedBuild, OnlyStage3AdoptsIt) {
  auto group = comm::Group::create(comm::RendezvousInfo{}, std::chrono::seconds(10));
  PartitionedBuild build(*group, at::kFloat);
  models::Gpt built(small_gpt(), 7, build.block_hook());
  EXPECT_THROW(Engine::initialize(built.ptr(), stage(2), *group, &build), ConfigError);
}

}  // namespace partitioned_build_test
}  // namespace deepshard::zero
