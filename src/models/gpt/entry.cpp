// The GPT's registry entry (registry.h): its config from a run's model section, the model, its
// parameter count and shapes, FLOPs, the fields a checkpoint saves of it and its Hugging Face
// layout.
#include <nlohmann/json.hpp>

#include "deepshard/config/run_config.h"
#include "deepshard/models/gpt.h"
#include "deepshard/util/error.h"
#include "models/gpt/memory.h"
#include "models/gpt/tensor_parallel.h"
#include "models/registry.h"

namespace deepshard::models {

checkpoint::HfLayout gpt_hf_layout();  // hf_names.cpp

GptConfig gpt_config(const config::ModelConfig& m) {
  GptConfig c;
  c.n_layer = m.n_layer;
  c.n_head = m.n_head;
  c.n_embd = m.n_embd;
  c.block_size = m.block_size;
  c.vocab_size = m.vocab_size;
  c.dropout = m.dropout;
  c.bias = m.bias.value_or(c.bias);
  c.fused_kernels = m.fused_kernels;
  return c;
}

namespace {

// Parameters with the byte-level vocabulary (256), tied embeddings: tiny ~0.84M, small ~10.8M,
// gpt2 ~85.8M (124M with vocab_size 50257).
std::vector<config::ModelPreset> presets() {
  return {{.name = "tiny", .n_layer = 4, .n_head = 4, .n_embd = 128, .block_size = 128},
          {.name = "small", .n_layer = 6, .n_head = 6, .n_embd = 384, .block_size = 256},
          {.name = "gpt2", .n_layer = 12, .n_head = 12, .n_embd = 768, .block_size = 1024}};
}

void check(const config::ModelConfig& m, std::vector<std::pair<std::string, std::string>>& out) {
  const std::string other = "a key of another architecture's model (model.arch is \"gpt\")";
  if (m.n_kv_head != 0) out.emplace_back("model.n_kv_head", other);
  if (m.intermediate_size != 0)
    out.emplace_back("model.intermediate_size", other + "; gpt's MLP is 4 x n_embd wide");
  if (m.rope_theta) out.emplace_back("model.rope_theta", other);
  if (m.rms_norm_eps) out.emplace_back("model.rms_norm_eps", other);
  if (m.pooling) out.emplace_back("model.pooling", other + "; gpt has no classification head");
  if (m.tie_word_embeddings && !*m.tie_word_embeddings)
    out.emplace_back("model.tie_word_embeddings", "gpt's head is always tied to wte");
}

std::shared_ptr<CausalLmImpl> make_gpt(const config::ModelConfig& m, uint64_t seed,
                                       const sharding::UnitBuilt& on_unit_built) {
  return std::make_shared<GptImpl>(gpt_config(m), seed, on_unit_built);
}

int64_t count(const config::ModelConfig& m) { return gpt_parameter_count(gpt_config(m)); }

std::vector<NamedShape> shapes(const config::ModelConfig& m) {
  return gpt_parameter_shapes(gpt_config(m));
}

std::string tied(const config::ModelConfig&) { return "wte.weight"; }

FlopsPerToken flops(const config::ModelConfig& m, int64_t seq_len) {
  return gpt_flops_per_token(gpt_config(m), seq_len);
}

ActivationEstimate activations(const config::ModelConfig& m, int64_t batch, int64_t seq,
                               int64_t dtype_bytes, std::optional<int64_t> checkpointed) {
  const GptActivationEstimate e =
      estimate_gpt_activations(gpt_config(m), batch, seq, dtype_bytes, checkpointed);
  return {.plain = e.plain, .checkpointed = e.checkpointed, .regions = e.regions};
}

std::unique_ptr<TensorParallelModel> tensor_parallel(std::shared_ptr<CausalLmImpl> model,
                                                     comm::Group& tensor,
                                                     const TensorSliceBuild* built) {
  auto gpt = std::dynamic_pointer_cast<GptImpl>(model);
  DS_ASSERT(gpt != nullptr, "the gpt entry's tensor-parallel model over a ", model->arch());
  return std::make_unique<TensorParallelGpt>(Gpt(gpt), tensor, built);
}

void save_fields(const config::ModelConfig& m, nlohmann::json& saved) {
  saved["bias"] = gpt_config(m).bias;
}

void load_fields(const nlohmann::json& saved, config::ModelConfig& m) {
  m.bias = saved.at("bias").get<bool>();
}

}  // namespace

const ArchEntry& gpt_entry() {
  static const ArchEntry entry{.name = "gpt",
                               .layer_type = "Block",
                               .presets = presets,
                               .check_model = check,
                               .make_model = make_gpt,
                               .parameter_count = count,
                               .parameter_shapes = shapes,
                               .tied_parameter = tied,
                               .flops_per_token = flops,
                               .estimate_activations = activations,
                               .save_fields = save_fields,
                               .load_fields = load_fields,
                               .hf_layout = gpt_hf_layout,
                               .tensor_plan = gpt_tensor_plan,
                               .make_tensor_parallel = tensor_parallel};
  return entry;
}

}  // namespace deepshard::models
