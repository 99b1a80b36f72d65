// A models::Llama as a Hugging Face Llama safetensors file (LlamaForCausalLM.save_pretrained
// names: model.embed_tokens.weight, model.layers.{i}.self_attn.q_proj.weight, ...,
// model.norm.weight, lm_head.weight). The model's parameter names are HF's and its Linear weights
// are [out, in] like HF's, so tensors map one to one; with tie_word_embeddings the file has no
// lm_head.weight (HF drops the tied copy when saving).
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>

#include "deepshard/models/llama.h"

namespace deepshard::checkpoint {

// Writes tensors by the model's parameter names (= HF's), converted to `dtype`.
void save_llama_safetensors(const std::map<std::string, at::Tensor>& params,
                            const std::string& path, at::ScalarType dtype = at::kFloat);

// Copies the file's tensors into the model's parameters (converted to their dtypes and devices).
// Ignores rotary inv_freq buffers (older HF files) and, for a tied model, lm_head.weight. A
// missing tensor, a shape mismatch or an unknown tensor is an IoError naming the file and tensor.
void load_llama_safetensors(models::LlamaImpl& model, const std::string& path);

}  // namespace deepshard::checkpoint
