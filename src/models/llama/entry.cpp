// The Llama's registry entry (registry.h): its config from a run's model section, the model, its
// parameter count and shapes, FLOPs, the fields a checkpoint saves of it and its Hugging Face
// layout.
#include <nlohmann/json.hpp>

#include "deepshard/config/run_config.h"
#include "deepshard/models/llama.h"
#include "deepshard/util/error.h"
#include "models/llama/tensor_parallel.h"
#include "models/registry.h"

namespace deepshard::models {

checkpoint::HfLayout llama_hf_layout();  // hf_names.cpp

LlamaConfig llama_config(const config::ModelConfig& m) {
  LlamaConfig c;
  c.n_layer = m.n_layer;
  c.n_head = m.n_head;
  c.n_kv_head = m.n_kv_head;
  c.n_embd = m.n_embd;
  c.intermediate_size = m.intermediate_size;
  c.block_size = m.block_size;
  c.vocab_size = m.vocab_size;
  c.rope_theta = m.rope_theta.value_or(c.rope_theta);
  c.rms_norm_eps = m.rms_norm_eps.value_or(c.rms_norm_eps);
  c.tie_word_embeddings = m.tie_word_embeddings.value_or(c.tie_word_embeddings);
  c.fused_kernels = m.fused_kernels;
  return c;
}

namespace {

// Parameters with the byte-level vocabulary (256), untied head, intermediate_size about 8/3 n_embd
// as in Llama: tiny ~0.79M, small ~9.6M.
std::vector<config::ModelPreset> presets() {
  return {{.name = "tiny",
           .n_layer = 4,
           .n_head = 4,
           .n_embd = 128,
           .block_size = 128,
           .n_kv_head = 2,
           .intermediate_size = 344},
          {.name = "small",
           .n_layer = 6,
           .n_head = 6,
           .n_embd = 384,
           .block_size = 256,
           .n_kv_head = 2,
           .intermediate_size = 1024}};
}

void check(const config::ModelConfig& m, std::vector<std::pair<std::string, std::string>>& out) {
  if (m.bias.value_or(false))
    out.emplace_back("model.bias",
                     "model.arch \"llama\" has no biases (Hugging Face's attention_bias and "
                     "mlp_bias false)");
  if (m.dropout != 0.0)
    out.emplace_back("model.dropout", "model.arch \"llama\" has no dropout (only 0 is accepted)");
  if (m.pooling)
    out.emplace_back("model.pooling",
                     "model.arch \"llama\" has no classification head to pool for");
  if (m.n_kv_head > 0 && m.n_head % m.n_kv_head != 0)
    out.emplace_back("model.n_kv_head",
                     std::to_string(m.n_kv_head) +
                         " does not divide model.n_head = " + std::to_string(m.n_head));
  if (m.n_head > 0 && m.n_embd % m.n_head == 0 && (m.n_embd / m.n_head) % 2 != 0)
    out.emplace_back("model.n_embd",
                     "the head size n_embd / n_head = " + std::to_string(m.n_embd / m.n_head) +
                         " must be even (rotary embeddings rotate pairs)");
}

std::shared_ptr<CausalLmImpl> make_llama(const config::ModelConfig& m, uint64_t seed,
                                         const sharding::UnitBuilt& on_unit_built) {
  return std::make_shared<LlamaImpl>(llama_config(m), seed, on_unit_built);
}

int64_t count(const config::ModelConfig& m) { return llama_parameter_count(llama_config(m)); }

std::vector<NamedShape> shapes(const config::ModelConfig& m) {
  return llama_parameter_shapes(llama_config(m));
}

std::string tied(const config::ModelConfig& m) {
  return llama_config(m).tie_word_embeddings ? "model.embed_tokens.weight" : "";
}

FlopsPerToken flops(const config::ModelConfig& m, int64_t seq_len) {
  return llama_flops_per_token(llama_config(m), seq_len);
}

std::unique_ptr<TensorParallelModel> tensor_parallel(std::shared_ptr<CausalLmImpl> model,
                                                     comm::Group& tensor,
                                                     const TensorSliceBuild* built) {
  auto llama = std::dynamic_pointer_cast<LlamaImpl>(model);
  DS_ASSERT(llama != nullptr, "the llama entry's tensor-parallel model over a ", model->arch());
  return std::make_unique<TensorParallelLlama>(Llama(llama), tensor, built);
}

void save_fields(const config::ModelConfig& m, nlohmann::json& saved) {
  const LlamaConfig c = llama_config(m);
  saved["n_kv_head"] = c.n_kv_head;
  saved["intermediate_size"] = c.intermediate_size;
  saved["rope_theta"] = c.rope_theta;
  saved["rms_norm_eps"] = c.rms_norm_eps;
  saved["tie_word_embeddings"] = c.tie_word_embeddings;
}

void load_fields(const nlohmann::json& saved, config::ModelConfig& m) {
  m.n_kv_head = saved.at("n_kv_head").get<int64_t>();
  m.intermediate_size = saved.at("intermediate_size").get<int64_t>();
  m.rope_theta = saved.at("rope_theta").get<double>();
  m.rms_norm_eps = saved.at("rms_norm_eps").get<double>();
  m.tie_word_embeddings = saved.at("tie_word_embeddings").get<bool>();
}

}  // namespace

const ArchEntry& llama_entry() {
  static const ArchEntry entry{.name = "llama",
                               .layer_type = "LlamaBlock",
                               .presets = presets,
                               .check_model = check,
                               .make_model = make_llama,
                               .parameter_count = count,
                               .parameter_shapes = shapes,
                               .tied_parameter = tied,
                               .flops_per_token = flops,
                               .estimate_activations = nullptr,
                               .save_fields = save_fields,
                               .load_fields = load_fields,
                               .hf_layout = llama_hf_layout,
                               .tensor_plan = llama_tensor_plan,
                               .make_tensor_parallel = tensor_parallel};
  return entry;
}

}  // namespace deepshard::models
