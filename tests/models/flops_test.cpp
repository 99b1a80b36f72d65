// gpt_flops_per_token against a count taken from the built model's own weights: every Linear
// weight [out, in] costs 2·out·in FLOPs per token forward, the tied head 2·V·C, and attention's
// two T×T matmuls 2·T·C each per layer; backward is twice forward. llama_flops_per_token likewise
// (every projection a Linear, the head tied or not).
#include "deepshard/models/flops.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "deepshard/models/gpt.h"
#include "deepshard/models/llama.h"

namespace deepshard::models {
namespace flops_test {

double counted_forward_flops(GptImpl& model, int64_t seq) {
  double flops = 0;
  for (const auto& m : model.modules(/*include_self=*/false)) {
    if (auto* linear = m->as<torch::nn::Linear>()) flops += 2.0 * double(linear->weight.numel());
  }
  const auto& c = model.config();
  flops += 2.0 * double(model.wte->weight.numel());                           // tied head
  flops += double(c.n_layer) * 2.0 * (2.0 * double(seq) * double(c.n_embd));  // QK^T, AV
  return flops;
}

TEST(GptFlops, MatchesTheModelsShapes) {
  for (auto [layers, embd, block, vocab] :
       {std::tuple{2, 32, 16, 256}, std::tuple{4, 256, 128, 256}, std::tuple{6, 384, 256, 256}}) {
    GptConfig c;
    c.n_layer = layers;
    c.n_head = 2;
    c.n_embd = embd;
    c.block_size = block;
    c.vocab_size = vocab;
    Gpt model(c, 1);
    const auto f = gpt_flops_per_token(c);
    EXPECT_DOUBLE_EQ(f.forward, counted_forward_flops(*model, block));
    EXPECT_DOUBLE_EQ(f.backward, 2 * f.forward);
    EXPECT_DOUBLE_EQ(flops_per_token(c), 3 * f.forward);
    // A shorter sequence changes only the attention term.
    EXPECT_DOUBLE_EQ(gpt_flops_per_token(c, block / 2).forward,
                     counted_forward_flops(*model, block / 2));
  }
}

TEST(LlamaFlops, MatchesTheModelsShapes) {
  for (bool tied : {false, true}) {
    LlamaConfig c;
    c.n_layer = 3;
    c.n_head = 4;
    c.n_kv_head = 2;
    c.n_embd = 64;
    c.intermediate_size = 176;
    c.block_size = 32;
    c.tie_word_embeddings = tied;
    Llama model(c, 1);
    double counted = 0;
    for (const auto& m : model->modules(/*include_self=*/false)) {
      if (auto* linear = m->as<torch::nn::Linear>())
        counted += 2.0 * double(linear->weight.numel());
    }
    if (tied) counted += 2.0 * double(c.vocab_size * c.n_embd);  // the head is embed_tokens
    counted += double(c.n_layer) * 4.0 * double(c.block_size * c.n_embd);  // QK^T, AV
    const auto f = llama_flops_per_token(c);
    EXPECT_DOUBLE_EQ(f.forward, counted) << "tied " << tied;
    EXPECT_DOUBLE_EQ(f.training(), 3 * f.forward);
  }
}

}  // namespace flops_test
}  // namespace deepshard::models
