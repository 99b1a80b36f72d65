// The GPT-2 <-> Hugging Face name and layout mapping over safetensors.
#include "deepshard/checkpoint/hf_gpt2.h"

#include <ATen/ATen.h>
#include <torch/torch.h>

#include <set>

#include "deepshard/checkpoint/safetensors.h"
#include "deepshard/util/error.h"

namespace deepshard::checkpoint {
namespace {

const std::string kPrefix = "transformer.";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Conv1D weights, stored [in, out] by HF.
bool is_conv1d_weight(const std::string& name) {
  return ends_with(name, ".c_attn.weight") || ends_with(name, ".c_proj.weight") ||
         ends_with(name, ".c_fc.weight");
}

// HF tensors that are not parameters of our model.
bool is_ignored_hf_tensor(const std::string& name) {
  return name == "lm_head.weight" || ends_with(name, ".attn.bias") ||
         ends_with(name, ".attn.masked_bias");
}

}  // namespace

std::string hf_gpt2_name(const std::string& name) { return kPrefix + name; }

void save_gpt2_safetensors(const std::map<std::string, at::Tensor>& params, const std::string& path,
                           at::ScalarType dtype) {
  TensorMap tensors;
  for (const auto& [name, value] : params) {
    at::Tensor t = value.detach();
    if (is_conv1d_weight(name)) t = t.t();
    tensors[hf_gpt2_name(name)] = t.to(at::kCPU, dtype);
  }
  save_safetensors(path, tensors, {{"format", "pt"}});
}

void save_gpt2_safetensors(const models::Gpt& model, const std::string& path,
                           at::ScalarType dtype) {
  std::map<std::string, at::Tensor> params;
  for (const auto& p : model->named_parameters()) params[p.key()] = p.value();
  save_gpt2_safetensors(params, path, dtype);
}

void load_gpt2_safetensors(models::GptImpl& model, const std::string& path) {
  SafetensorsContent file = load_safetensors(path);
  // Strip the GPT2LMHeadModel prefix so both file flavours map to our names.
  TensorMap by_name;
  for (auto& [name, t] : file.tensors) {
    if (is_ignored_hf_tensor(name)) continue;
    const bool prefixed = name.rfind(kPrefix, 0) == 0;
    by_name[prefixed ? name.substr(kPrefix.size()) : name] = t;
  }
  torch::NoGradGuard no_grad;
  std::set<std::string> used;
  for (auto& p : model.named_parameters()) {
    const std::string hf = hf_gpt2_name(p.key());
    auto it = by_name.find(p.key());
    DS_CHECK(it != by_name.end(), IoError, path, ": missing tensor '", hf, "'");
    at::Tensor t = it->second;
    if (is_conv1d_weight(p.key())) t = t.t();
    DS_CHECK(t.sizes() == p.value().sizes(), IoError, path, ": tensor '", hf, "' has shape ",
             (is_conv1d_weight(p.key()) ? t.t() : t).sizes(), " but the model needs ",
             (is_conv1d_weight(p.key()) ? p.value().t() : p.value()).sizes());
    p.value().copy_(t);
    used.insert(p.key());
  }
  for (const auto& [name, t] : by_name)
    DS_CHECK(used.count(name), IoError, path, ": unexpected tensor '", hf_gpt2_name(name),
             "' (the model has no such parameter: another n_layer or bias setting?)");
}

}  // namespace deepshard::checkpoint
