// Hugging Face safetensors weights of a model with its architecture's names and layout (the
// registry entry's hf_layout): what model.init_from, train.save_weights, `convert --to
// safetensors` and `generate --weights` use.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <vector>

#include "deepshard/models/causal_lm.h"

namespace deepshard::models {

// Writes every parameter of `model` with HF's names, converted to `dtype`.
void save_hf_safetensors(const CausalLmImpl& model, const std::string& path,
                         at::ScalarType dtype = at::kFloat);
// The same from tensors by the model's parameter names (a checkpoint's consolidated weights) of
// architecture `arch` (ConfigError for an unknown one).
void save_hf_safetensors(const std::string& arch, const std::map<std::string, at::Tensor>& params,
                         const std::string& path, at::ScalarType dtype = at::kFloat);
// Copies an HF file's tensors into `model`'s parameters (IoError on a missing, misshapen or
// unexpected tensor). Returns the parameters the file lacked that keep their initialisation (the
// architecture's fresh_if_missing: bert's classification head).
std::vector<std::string> load_hf_safetensors(CausalLmImpl& model, const std::string& path);

}  // namespace deepshard::models
