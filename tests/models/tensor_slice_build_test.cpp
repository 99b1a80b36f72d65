// models::TensorSliceBuild: a GPT and a Llama built with the hook hold, in every block, exactly
// tensor rank t's slices of the model built whole with the same seed (so the tensor-parallel
// wrapper's split of the root completes the single-rank initialisation's split), the replicated
// parameters whole; no block is held whole after its hook ran; the next hook sees the split block;
// and a split that does not divide is an error naming the parameter.
#include "models/tensor_slice_build.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>

#include "deepshard/models/gpt.h"
#include "deepshard/models/llama.h"
#include "deepshard/util/error.h"
#include "models/tensor_slices.h"

namespace deepshard::models {
namespace tensor_slice_build_test {

std::map<std::string, at::Tensor> parameters(torch::nn::Module& model) {
  std::map<std::string, at::Tensor> out;
  for (const auto& item : model.named_parameters()) out[item.key()] = item.value();
  return out;
}

// Every parameter of `built` (blocks split by `slices` for rank t of n) against `whole`: blocks'
// split parameters are rank t's slice of the whole value, marked split at build; everything else
// is the whole value, unmarked.
void expect_slices_of(torch::nn::Module& built, torch::nn::Module& whole,
                      const sharding::TensorPlan& plan, const TensorSliceBuild& slices, int t,
                      int n, const std::string& block) {
  int split = 0;
  for (const auto& [name, value] : parameters(built)) {
    const at::Tensor& reference = parameters(whole).at(name);
    const bool in_block = name.rfind(block, 0) == 0;
    const TensorSplit rule = plan.split(name);
    if (in_block && rule != TensorSplit::kReplicated) {
      EXPECT_TRUE(slices.split_at_build(value)) << name;
      EXPECT_TRUE(torch::equal(value, tensor_slice(reference, rule, t, n))) << name;
      ++split;
    } else {
      EXPECT_FALSE(slices.split_at_build(value)) << name;
      EXPECT_TRUE(torch::equal(value, reference)) << name;
    }
  }
  EXPECT_GT(split, 0);
}

models::GptConfig small_gpt(int64_t layers, int64_t heads) {
  models::GptConfig c;
  c.n_layer = layers;
  c.n_head = heads;
  c.n_embd = 32;
  c.block_size = 16;
  c.vocab_size = 64;
  return c;
}

TEST(TensorSliceBuild, GptBlocksHoldTheirSlicesOfTheSeededModel) {
  const models::GptConfig c = small_gpt(3, 4);
  models::Gpt whole(c, 7);
  int64_t block_bytes = 0;
  for (const auto& p : whole->blocks[0]->parameters()) block_bytes += p.numel() * 4;
  for (int t = 0; t < 2; ++t) {
    int64_t next_seen = 0;
    TensorSliceBuild slices(
        models::gpt_tensor_plan(), t, 2, [&](size_t unit, torch::nn::Module& block) {
          // The next hook (zero.Init's in training) gets the block already split.
          EXPECT_EQ(block.named_parameters()["attn.c_attn.weight"].size(0), 3 * c.n_embd / 2)
              << unit;
          ++next_seen;
        });
    models::Gpt built(c, 7, slices.unit_hook());
    expect_slices_of(*built, *whole, models::gpt_tensor_plan(), slices, t, 2, "h.");
    EXPECT_EQ(next_seen, 3);
    EXPECT_EQ(slices.blocks(), 3);
    EXPECT_EQ(slices.peak_whole_block_bytes(), block_bytes);
  }
}

TEST(TensorSliceBuild, LlamaBlocksHoldTheirSlicesOfTheSeededModel) {
  models::LlamaConfig c;
  c.intermediate_size = 128;
  models::Llama whole(c, 11);
  for (int t = 0; t < 2; ++t) {
    TensorSliceBuild slices(models::llama_tensor_plan(), t, 2);
    models::Llama built(c, 11, slices.unit_hook());
    expect_slices_of(*built, *whole, models::llama_tensor_plan(), slices, t, 2, "model.layers.");
  }
}

TEST(TensorSliceBuild, ASplitThatDoesNotDivideNamesTheParameter) {
  const models::GptConfig c = small_gpt(1, 2);
  TensorSliceBuild slices(models::gpt_tensor_plan(), 0, 3);
  try {
    models::Gpt built(c, 1, slices.unit_hook());
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor_parallel.size 3: block 0's attn.c_attn.weight"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace tensor_slice_build_test
}  // namespace deepshard::models
