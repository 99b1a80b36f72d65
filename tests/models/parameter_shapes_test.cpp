// models::gpt_parameter_shapes / llama_parameter_shapes: the same names, shapes and order as the
// built models' named_parameters() (GPT with and without biases; Llama with an untied and a tied
// head, grouped key/value heads), and their sums equal the parameter counts.
#include "deepshard/models/parameter_shapes.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "models/gpt/memory.h"

namespace deepshard::models {
namespace parameter_shapes_test {

void expect_same(const std::vector<NamedShape>& shapes, CausalLmImpl& model, int64_t count) {
  const auto params = model.named_parameters();
  ASSERT_EQ(shapes.size(), params.size());
  int64_t total = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    EXPECT_EQ(shapes[i].name, params[i].key());
    EXPECT_EQ(at::IntArrayRef(shapes[i].shape), params[i].value().sizes()) << shapes[i].name;
    total += shapes[i].numel();
  }
  EXPECT_EQ(total, model.num_parameters());
  EXPECT_EQ(total, count);
}

TEST(ParameterShapes, GptMatchesTheBuiltModel) {
  for (bool bias : {true, false}) {
    GptConfig c;
    c.n_layer = 3;
    c.n_head = 4;
    c.n_embd = 32;
    c.block_size = 16;
    c.vocab_size = 50;
    c.bias = bias;
    Gpt model(c, 1);
    expect_same(gpt_parameter_shapes(c), *model, gpt_parameter_count(c));
  }
}

TEST(ParameterShapes, LlamaMatchesTheBuiltModel) {
  for (bool tied : {false, true}) {
    LlamaConfig c;
    c.n_layer = 3;
    c.n_head = 4;
    c.n_kv_head = 2;
    c.n_embd = 32;
    c.intermediate_size = 40;
    c.block_size = 16;
    c.vocab_size = 50;
    c.tie_word_embeddings = tied;
    Llama model(c, 1);
    expect_same(llama_parameter_shapes(c), *model, llama_parameter_count(c));
  }
}

}  // namespace parameter_shapes_test
}  // namespace deepshard::models
