// The BERT's registry entry (registry.h): its config from a run's model section and its checks,
// presets, the model, its sizes, FLOPs, the fields a checkpoint saves of it and its Hugging Face
// layout. It has no tensor-parallel split.
#include <nlohmann/json.hpp>

#include "deepshard/config/run_config.h"
#include "deepshard/models/bert.h"
#include "models/registry.h"

namespace deepshard::models {

checkpoint::HfLayout bert_hf_layout();  // hf_names.cpp

BertConfig bert_config(const config::ModelConfig& m) {
  BertConfig c;
  c.n_layer = m.n_layer;
  c.n_head = m.n_head;
  c.n_embd = m.n_embd;
  c.intermediate_size = m.intermediate_size;
  c.block_size = m.block_size;
  c.vocab_size = m.vocab_size;
  c.dropout = m.dropout;
  c.fused_kernels = m.fused_kernels;
  c.num_labels = m.num_labels;
  c.mean_pooling = m.pooling.value_or("first") == "mean";
  return c;
}

namespace {

// Parameters with the byte-level vocabulary (256; its last id, 0xFF, is the mask token), MLP 4
// n_embd wide as BERT: tiny ~0.86M, small ~10.9M.
std::vector<config::ModelPreset> presets() {
  return {{.name = "tiny",
           .n_layer = 4,
           .n_head = 4,
           .n_embd = 128,
           .block_size = 128,
           .intermediate_size = 512},
          {.name = "small",
           .n_layer = 6,
           .n_head = 6,
           .n_embd = 384,
           .block_size = 256,
           .intermediate_size = 1536}};
}

void check(const config::ModelConfig& m, std::vector<std::pair<std::string, std::string>>& out) {
  const std::string other = "a key of another architecture's model (model.arch is \"bert\")";
  if (m.n_kv_head != 0) out.emplace_back("model.n_kv_head", other);
  if (m.rope_theta) out.emplace_back("model.rope_theta", other + "; bert learns its positions");
  if (m.rms_norm_eps) out.emplace_back("model.rms_norm_eps", other + "; bert uses LayerNorm");
  if (m.tie_word_embeddings && !*m.tie_word_embeddings)
    out.emplace_back("model.tie_word_embeddings",
                     "bert's masked-LM decoder is always tied to the word embeddings");
  if (m.bias && !*m.bias)
    out.emplace_back("model.bias", "model.arch \"bert\" always has its Linear biases");
  if (m.vocab_size < 2)
    out.emplace_back("model.vocab_size",
                     "bert needs at least one token and the mask token (its last id)");
  if (m.n_head > 0 && m.n_embd % m.n_head != 0)
    out.emplace_back("model.n_embd", std::to_string(m.n_embd) + " is not a multiple of n_head " +
                                         std::to_string(m.n_head));
}

std::shared_ptr<CausalLmImpl> make_bert(const config::ModelConfig& m, uint64_t seed,
                                        const sharding::UnitBuilt& on_unit_built) {
  return std::make_shared<BertImpl>(bert_config(m), seed, on_unit_built);
}

int64_t count(const config::ModelConfig& m) { return bert_parameter_count(bert_config(m)); }

std::vector<NamedShape> shapes(const config::ModelConfig& m) {
  return bert_parameter_shapes(bert_config(m));
}

std::string tied(const config::ModelConfig&) { return "bert.embeddings.word_embeddings.weight"; }

FlopsPerToken flops(const config::ModelConfig& m, int64_t seq_len) {
  return bert_flops_per_token(bert_config(m), seq_len);
}

sharding::TensorPlan no_tensor_plan() { return {}; }

void save_fields(const config::ModelConfig& m, nlohmann::json& saved) {
  saved["intermediate_size"] = bert_config(m).intermediate_size;
  if (m.num_labels > 0) saved["num_labels"] = m.num_labels;
  if (m.pooling) saved["pooling"] = *m.pooling;
}

void load_fields(const nlohmann::json& saved, config::ModelConfig& m) {
  m.intermediate_size = saved.at("intermediate_size").get<int64_t>();
  m.num_labels = saved.value("num_labels", int64_t{0});
  if (saved.contains("pooling")) m.pooling = saved.at("pooling").get<std::string>();
}

}  // namespace

const ArchEntry& bert_entry() {
  static const ArchEntry entry{.name = "bert",
                               .layer_type = "BertLayer",
                               .presets = presets,
                               .check_model = check,
                               .make_model = make_bert,
                               .parameter_count = count,
                               .parameter_shapes = shapes,
                               .tied_parameter = tied,
                               .flops_per_token = flops,
                               .estimate_activations = nullptr,
                               .save_fields = save_fields,
                               .load_fields = load_fields,
                               .hf_layout = bert_hf_layout,
                               .tensor_plan = no_tensor_plan,
                               .make_tensor_parallel = nullptr};
  return entry;
}

}  // namespace deepshard::models
