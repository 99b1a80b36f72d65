// The Llama's parameter names and shapes from its config (parameter_shapes.h).
#include "deepshard/models/parameter_shapes.h"

namespace deepshard::models {

std::vector<NamedShape> llama_parameter_shapes(const LlamaConfig& c) {
  const int64_t C = c.n_embd, head_dim = c.n_embd / c.n_head, I = c.intermediate_size;
  std::vector<NamedShape> out = {
      {"model.embed_tokens.weight", {c.vocab_size, C}, NamedShape::kEmbedding}};
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const std::string l = "model.layers." + std::to_string(i) + ".";
    out.push_back({l + "input_layernorm.weight", {C}, i});
    out.push_back({l + "self_attn.q_proj.weight", {c.n_head * head_dim, C}, i});
    out.push_back({l + "self_attn.k_proj.weight", {c.n_kv_head * head_dim, C}, i});
    out.push_back({l + "self_attn.v_proj.weight", {c.n_kv_head * head_dim, C}, i});
    out.push_back({l + "self_attn.o_proj.weight", {C, c.n_head * head_dim}, i});
    out.push_back({l + "post_attention_layernorm.weight", {C}, i});
    out.push_back({l + "mlp.gate_proj.weight", {I, C}, i});
    out.push_back({l + "mlp.up_proj.weight", {I, C}, i});
    out.push_back({l + "mlp.down_proj.weight", {C, I}, i});
  }
  out.push_back({"model.norm.weight", {C}});
  if (!c.tie_word_embeddings) out.push_back({"lm_head.weight", {c.vocab_size, C}});
  return out;
}

}  // namespace deepshard::models
