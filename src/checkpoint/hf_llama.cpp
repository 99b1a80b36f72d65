// The Llama <-> Hugging Face mapping over safetensors (hf_llama.h): the names are the same.
#include "deepshard/checkpoint/hf_llama.h"

#include <torch/torch.h>

#include <set>

#include "deepshard/checkpoint/safetensors.h"
#include "deepshard/util/error.h"

namespace deepshard::checkpoint {
namespace {

// HF tensors that are not parameters of the model.
bool is_ignored_hf_tensor(const std::string& name, bool tied) {
  const std::string inv_freq = ".rotary_emb.inv_freq";
  const bool rotary = name.size() >= inv_freq.size() &&
                      name.compare(name.size() - inv_freq.size(), inv_freq.size(), inv_freq) == 0;
  return rotary || (tied && name == "lm_head.weight");
}

}  // namespace

void save_llama_safetensors(const std::map<std::string, at::Tensor>& params,
                            const std::string& path, at::ScalarType dtype) {
  TensorMap tensors;
  for (const auto& [name, value] : params) tensors[name] = value.detach().to(at::kCPU, dtype);
  save_safetensors(path, tensors, {{"format", "pt"}});
}

void load_llama_safetensors(models::LlamaImpl& model, const std::string& path) {
  SafetensorsContent file = load_safetensors(path);
  const bool tied = model.config().tie_word_embeddings;
  torch::NoGradGuard no_grad;
  std::set<std::string> used;
  for (auto& p : model.named_parameters()) {
    auto it = file.tensors.find(p.key());
    DS_CHECK(it != file.tensors.end(), IoError, path, ": missing tensor '", p.key(), "'",
             p.key() == "lm_head.weight" ? " (a model saved with tie_word_embeddings?)" : "");
    DS_CHECK(it->second.sizes() == p.value().sizes(), IoError, path, ": tensor '", p.key(),
             "' has shape ", it->second.sizes(), " but the model needs ", p.value().sizes());
    p.value().copy_(it->second);
    used.insert(p.key());
  }
  for (const auto& [name, t] : file.tensors)
    DS_CHECK(used.count(name) || is_ignored_hf_tensor(name, tied), IoError, path,
             ": unexpected tensor '", name,
             "' (the model has no such parameter: another n_layer or model.arch?)");
}

}  // namespace deepshard::checkpoint
