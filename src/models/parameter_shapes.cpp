// The GPT's and the Llama's parameter names and shapes from their configs (parameter_shapes.h).
#include "deepshard/models/parameter_shapes.h"

namespace deepshard::models {

int64_t NamedShape::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<NamedShape> gpt_parameter_shapes(const GptConfig& c) {
  const int64_t C = c.n_embd;
  std::vector<NamedShape> out = {{"wte.weight", {c.vocab_size, C}},
                                 {"wpe.weight", {c.block_size, C}}};
  // Linear layers: weight [out, in], then the bias when config.bias; LayerNorms keep theirs.
  auto linear = [&](const std::string& name, int64_t in, int64_t features) {
    out.push_back({name + ".weight", {features, in}});
    if (c.bias) out.push_back({name + ".bias", {features}});
  };
  auto layer_norm = [&](const std::string& name) {
    out.push_back({name + ".weight", {C}});
    out.push_back({name + ".bias", {C}});
  };
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const std::string h = "h." + std::to_string(i) + ".";
    layer_norm(h + "ln_1");
    linear(h + "attn.c_attn", C, 3 * C);
    linear(h + "attn.c_proj", C, C);
    layer_norm(h + "ln_2");
    linear(h + "mlp.c_fc", C, 4 * C);
    linear(h + "mlp.c_proj", 4 * C, C);
  }
  layer_norm("ln_f");
  return out;
}

std::vector<NamedShape> llama_parameter_shapes(const LlamaConfig& c) {
  const int64_t C = c.n_embd, head_dim = c.n_embd / c.n_head, I = c.intermediate_size;
  std::vector<NamedShape> out = {{"model.embed_tokens.weight", {c.vocab_size, C}}};
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const std::string l = "model.layers." + std::to_string(i) + ".";
    out.push_back({l + "input_layernorm.weight", {C}});
    out.push_back({l + "self_attn.q_proj.weight", {c.n_head * head_dim, C}});
    out.push_back({l + "self_attn.k_proj.weight", {c.n_kv_head * head_dim, C}});
    out.push_back({l + "self_attn.v_proj.weight", {c.n_kv_head * head_dim, C}});
    out.push_back({l + "self_attn.o_proj.weight", {C, c.n_head * head_dim}});
    out.push_back({l + "post_attention_layernorm.weight", {C}});
    out.push_back({l + "mlp.gate_proj.weight", {I, C}});
    out.push_back({l + "mlp.up_proj.weight", {I, C}});
    out.push_back({l + "mlp.down_proj.weight", {C, I}});
  }
  out.push_back({"model.norm.weight", {C}});
  if (!c.tie_word_embeddings) out.push_back({"lm_head.weight", {c.vocab_size, C}});
  return out;
}

}  // namespace deepshard::models
