// The model of a run's `model` section through its architecture's registry entry
// (model_factory.h).
#include "deepshard/train/model_factory.h"

#include "models/registry.h"

namespace deepshard::train {

std::shared_ptr<models::CausalLmImpl> make_model(const config::ModelConfig& model, uint64_t seed,
                                                 const sharding::UnitBuilt& on_unit_built) {
  return models::find_arch(model.arch).make_model(model, seed, on_unit_built);
}

nlohmann::json saved_model_json(const config::ModelConfig& m) {
  const models::ArchEntry& arch = models::find_arch(m.arch);
  nlohmann::json out = {{"arch", arch.name},         {"preset", m.preset},
                        {"n_layer", m.n_layer},      {"n_head", m.n_head},
                        {"n_embd", m.n_embd},        {"block_size", m.block_size},
                        {"vocab_size", m.vocab_size}};
  arch.save_fields(m, out);
  return out;
}

config::ModelConfig model_from_saved_json(const nlohmann::json& saved) {
  config::ModelConfig m;
  const models::ArchEntry& arch = models::find_arch(saved.value("arch", std::string()));
  m.arch = arch.name;
  m.preset = saved.value("preset", m.preset);
  m.n_layer = saved.at("n_layer").get<int64_t>();
  m.n_head = saved.at("n_head").get<int64_t>();
  m.n_embd = saved.at("n_embd").get<int64_t>();
  m.block_size = saved.at("block_size").get<int64_t>();
  m.vocab_size = saved.at("vocab_size").get<int64_t>();
  arch.load_fields(saved, m);
  return m;
}

int64_t parameter_count(const config::ModelConfig& model) {
  return models::find_arch(model.arch).parameter_count(model);
}

double training_flops_per_token(const config::ModelConfig& model) {
  return models::find_arch(model.arch).flops_per_token(model, 0).training();
}

}  // namespace deepshard::train
