// Hugging Face weights by the model's architecture (hf_weights.h): its entry's layout over
// checkpoint's generic reader and writer.
#include "models/hf_weights.h"

#include "deepshard/checkpoint/hf_weights.h"
#include "models/registry.h"

namespace deepshard::models {

void save_hf_safetensors(const std::string& arch, const std::map<std::string, at::Tensor>& params,
                         const std::string& path, at::ScalarType dtype) {
  checkpoint::save_hf_safetensors(params, find_arch(arch).hf_layout(), path, dtype);
}

void save_hf_safetensors(const CausalLmImpl& model, const std::string& path, at::ScalarType dtype) {
  std::map<std::string, at::Tensor> params;
  for (const auto& p : model.named_parameters()) params[p.key()] = p.value();
  save_hf_safetensors(model.arch(), params, path, dtype);
}

std::vector<std::string> load_hf_safetensors(CausalLmImpl& model, const std::string& path) {
  return checkpoint::load_hf_safetensors(model, find_arch(model.arch()).hf_layout(), path);
}

}  // namespace deepshard::models
