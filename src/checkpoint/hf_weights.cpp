// Hugging Face weights by architecture (hf_weights.h).
#include "deepshard/checkpoint/hf_weights.h"

#include "deepshard/checkpoint/hf_gpt2.h"
#include "deepshard/checkpoint/hf_llama.h"
#include "deepshard/util/error.h"

namespace deepshard::checkpoint {

void save_hf_safetensors(const std::string& arch, const std::map<std::string, at::Tensor>& params,
                         const std::string& path, at::ScalarType dtype) {
  if (arch == "gpt") return save_gpt2_safetensors(params, path, dtype);
  if (arch == "llama") return save_llama_safetensors(params, path, dtype);
  throw Error("Hugging Face weights: unknown architecture \"" + arch + "\" (gpt, llama)");
}

void save_hf_safetensors(const models::CausalLmImpl& model, const std::string& path,
                         at::ScalarType dtype) {
  std::map<std::string, at::Tensor> params;
  for (const auto& p : model.named_parameters()) params[p.key()] = p.value();
  save_hf_safetensors(model.arch(), params, path, dtype);
}

void load_hf_safetensors(models::CausalLmImpl& model, const std::string& path) {
  if (auto* gpt = dynamic_cast<models::GptImpl*>(&model)) return load_gpt2_safetensors(*gpt, path);
  if (auto* llama = dynamic_cast<models::LlamaImpl*>(&model))
    return load_llama_safetensors(*llama, path);
  throw Error("Hugging Face weights: no format for model.arch \"" + model.arch() + "\"");
}

}  // namespace deepshard::checkpoint
