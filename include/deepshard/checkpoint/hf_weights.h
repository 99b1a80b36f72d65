// Hugging Face safetensors weights of a causal LM, by architecture: GPT-2's names and layout
// (hf_gpt2.h) for model.arch "gpt", Llama's (hf_llama.h) for "llama". What model.init_from,
// train.save_weights, `convert --to safetensors` and `generate --weights` use.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>

#include "deepshard/models/causal_lm.h"

namespace deepshard::checkpoint {

// Writes every parameter of `model` with HF's names, converted to `dtype`.
void save_hf_safetensors(const models::CausalLmImpl& model, const std::string& path,
                         at::ScalarType dtype = at::kFloat);
// The same from tensors by the model's parameter names (a checkpoint's consolidated weights) of
// architecture `arch`.
void save_hf_safetensors(const std::string& arch, const std::map<std::string, at::Tensor>& params,
                         const std::string& path, at::ScalarType dtype = at::kFloat);
// Copies an HF file's tensors into `model`'s parameters (IoError on a missing, misshapen or
// unknown tensor).
void load_hf_safetensors(models::CausalLmImpl& model, const std::string& path);

}  // namespace deepshard::checkpoint
