// Hugging Face safetensors weights (what save_pretrained writes) of any model, by a layout that
// says how its parameter names and tensors appear in such a file: a name prefix, the tensors
// stored transposed, and the file's tensors that are not parameters. Each architecture declares
// its layout (models/registry.h); this reader and writer know none.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <map>
#include <string>
#include <vector>

namespace deepshard::checkpoint {

struct HfLayout {
  // Prepended to a parameter's name in the file. On load, file names with or without it are
  // accepted (both flavours of a Hugging Face file: with and without the LM head's wrapper).
  std::string prefix;
  // Parameters (by name suffix) that the file stores transposed ([in, out], HF's Conv1D).
  std::vector<std::string> transposed_suffixes;
  // File tensors that are never parameters (buffers), by name suffix.
  std::vector<std::string> ignored_suffixes;
  // File tensors read only when the model has a parameter of that name (a head Hugging Face
  // writes even when it is tied to the embeddings).
  std::vector<std::string> optional_names;
  // Parameters a file may lack: they keep the model's own initialisation (a fine-tuning head the
  // pretrained file has none of).
  std::vector<std::string> fresh_if_missing;
  // Appended, for a parameter of that name, to the message about its missing tensor.
  std::map<std::string, std::string> missing_hints;
  // Appended to the message about a file tensor that is no parameter of the model.
  std::string unexpected_hint;
};

// Writes `params` (by the model's parameter names) with the layout's names and orientation,
// converted to `dtype` (float32, float16 or bfloat16).
void save_hf_safetensors(const std::map<std::string, at::Tensor>& params, const HfLayout& layout,
                         const std::string& path, at::ScalarType dtype = at::kFloat);

// Copies the file's tensors into `model`'s parameters (converted to their dtypes and devices). A
// missing tensor (other than the layout's fresh_if_missing), a shape mismatch or an unexpected
// tensor is an IoError naming the file and the tensor (by its name in the file). Returns the
// parameters the file lacked that kept their initialisation (fresh_if_missing), by model name.
std::vector<std::string> load_hf_safetensors(torch::nn::Module& model, const HfLayout& layout,
                                             const std::string& path);

}  // namespace deepshard::checkpoint
