// The GPT's parameter names and shapes from its config (parameter_shapes.h).
#include "deepshard/models/parameter_shapes.h"

namespace deepshard::models {

std::vector<NamedShape> gpt_parameter_shapes(const GptConfig& c) {
  const int64_t C = c.n_embd;
  std::vector<NamedShape> out = {{"wte.weight", {c.vocab_size, C}, NamedShape::kEmbedding},
                                 {"wpe.weight", {c.block_size, C}, NamedShape::kEmbedding}};
  int64_t item = NamedShape::kHead;  // the block the next parameters belong to
  // Linear layers: weight [out, in], then the bias when config.bias; LayerNorms keep theirs.
  auto linear = [&](const std::string& name, int64_t in, int64_t features) {
    out.push_back({name + ".weight", {features, in}, item});
    if (c.bias) out.push_back({name + ".bias", {features}, item});
  };
  auto layer_norm = [&](const std::string& name) {
    out.push_back({name + ".weight", {C}, item});
    out.push_back({name + ".bias", {C}, item});
  };
  for (int64_t i = 0; i < c.n_layer; ++i) {
    item = i;
    const std::string h = "h." + std::to_string(i) + ".";
    layer_norm(h + "ln_1");
    linear(h + "attn.c_attn", C, 3 * C);
    linear(h + "attn.c_proj", C, C);
    layer_norm(h + "ln_2");
    linear(h + "mlp.c_fc", C, 4 * C);
    linear(h + "mlp.c_proj", 4 * C, C);
  }
  item = NamedShape::kHead;
  layer_norm("ln_f");
  return out;
}

}  // namespace deepshard::models
