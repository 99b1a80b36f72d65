// A models::Gpt as a Hugging Face GPT-2 safetensors file (GPT2LMHeadModel.save_pretrained names:
// transformer.wte.weight, transformer.h.{i}.attn.c_attn.weight, ...). HF's Conv1D weights (c_attn,
// c_proj, c_fc) are stored [in, out], the transpose of our torch Linear [out, in]; the tied
// lm_head.weight is omitted, as HF does.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>

#include "deepshard/models/gpt.h"

namespace deepshard::checkpoint {

// The HF name of one of the model's parameter names ("h.0.attn.c_attn.weight" ->
// "transformer.h.0.attn.c_attn.weight").
std::string hf_gpt2_name(const std::string& name);

// Writes every parameter of `model`, converted to `dtype` (float32, float16 or bfloat16).
void save_gpt2_safetensors(const models::Gpt& model, const std::string& path,
                           at::ScalarType dtype = at::kFloat);
// The same from tensors by our parameter names (a checkpoint's consolidated weights).
void save_gpt2_safetensors(const std::map<std::string, at::Tensor>& params, const std::string& path,
                           at::ScalarType dtype = at::kFloat);

// Copies the file's tensors into the model's parameters (converted to their dtypes and devices).
// Accepts names with or without the "transformer." prefix (GPT2LMHeadModel or GPT2Model files) and
// ignores HF's lm_head.weight and attention-mask buffers (attn.bias, attn.masked_bias). A missing
// tensor, a shape mismatch or an unknown tensor is an IoError naming the file and the tensor.
void load_gpt2_safetensors(models::GptImpl& model, const std::string& path);
inline void load_gpt2_safetensors(models::Gpt& model, const std::string& path) {
  load_gpt2_safetensors(*model, path);
}

}  // namespace deepshard::checkpoint
