// The model of a run's `model` section by architecture (model_factory.h).
#include "deepshard/train/model_factory.h"

#include "deepshard/models/flops.h"
#include "deepshard/models/gpt_memory.h"
#include "deepshard/util/error.h"

namespace deepshard::train {

models::GptConfig gpt_config(const config::ModelConfig& m) {
  models::GptConfig c;
  c.n_layer = m.n_layer;
  c.n_head = m.n_head;
  c.n_embd = m.n_embd;
  c.block_size = m.block_size;
  c.vocab_size = m.vocab_size;
  c.dropout = m.dropout;
  c.bias = m.gpt_bias();
  c.fused_kernels = m.fused_kernels;
  return c;
}

models::LlamaConfig llama_config(const config::ModelConfig& m) {
  models::LlamaConfig c;
  c.n_layer = m.n_layer;
  c.n_head = m.n_head;
  c.n_kv_head = m.n_kv_head;
  c.n_embd = m.n_embd;
  c.intermediate_size = m.intermediate_size;
  c.block_size = m.block_size;
  c.vocab_size = m.vocab_size;
  c.rope_theta = m.llama_rope_theta();
  c.rms_norm_eps = m.llama_rms_norm_eps();
  c.tie_word_embeddings = m.llama_tied();
  c.fused_kernels = m.fused_kernels;
  return c;
}

std::shared_ptr<models::CausalLmImpl> make_model(const config::ModelConfig& model, uint64_t seed,
                                                 const sharding::UnitBuilt& on_unit_built) {
  if (model.arch == "gpt")
    return std::make_shared<models::GptImpl>(gpt_config(model), seed, on_unit_built);
  if (model.arch == "llama")
    return std::make_shared<models::LlamaImpl>(llama_config(model), seed, on_unit_built);
  throw ConfigError("model.arch: unknown architecture \"" + model.arch + "\" (gpt, llama)");
}

nlohmann::json saved_model_json(const config::ModelConfig& m) {
  nlohmann::json out = {{"arch", m.arch},
                        {"preset", m.preset},
                        {"n_layer", m.n_layer},
                        {"n_head", m.n_head},
                        {"n_embd", m.n_embd},
                        {"block_size", m.block_size},
                        {"vocab_size", m.vocab_size}};
  if (m.arch == "gpt") {
    out["bias"] = m.gpt_bias();
  } else {
    out["n_kv_head"] = m.n_kv_head;
    out["intermediate_size"] = m.intermediate_size;
    out["rope_theta"] = m.llama_rope_theta();
    out["rms_norm_eps"] = m.llama_rms_norm_eps();
    out["tie_word_embeddings"] = m.llama_tied();
  }
  return out;
}

config::ModelConfig model_from_saved_json(const nlohmann::json& saved) {
  config::ModelConfig m;
  m.arch = saved.value("arch", std::string("gpt"));
  m.preset = saved.value("preset", m.preset);
  m.n_layer = saved.at("n_layer").get<int64_t>();
  m.n_head = saved.at("n_head").get<int64_t>();
  m.n_embd = saved.at("n_embd").get<int64_t>();
  m.block_size = saved.at("block_size").get<int64_t>();
  m.vocab_size = saved.at("vocab_size").get<int64_t>();
  if (m.arch == "gpt") {
    m.bias = saved.at("bias").get<bool>();
  } else {
    m.n_kv_head = saved.at("n_kv_head").get<int64_t>();
    m.intermediate_size = saved.at("intermediate_size").get<int64_t>();
    m.rope_theta = saved.at("rope_theta").get<double>();
    m.rms_norm_eps = saved.at("rms_norm_eps").get<double>();
    m.tie_word_embeddings = saved.at("tie_word_embeddings").get<bool>();
  }
  return m;
}

int64_t parameter_count(const config::ModelConfig& model) {
  if (model.arch == "llama") return models::llama_parameter_count(llama_config(model));
  return models::gpt_parameter_count(gpt_config(model));
}

double training_flops_per_token(const config::ModelConfig& model) {
  if (model.arch == "llama") return models::llama_flops_per_token(llama_config(model)).training();
  return models::flops_per_token(gpt_config(model));
}

}  // namespace deepshard::train
