// Hugging Face safetensors weights by a layout (hf_weights.h): names, orientation, and the file
// tensors that are not parameters.
#include "deepshard/checkpoint/hf_weights.h"

#include <torch/torch.h>

#include <algorithm>
#include <set>

#include "deepshard/checkpoint/safetensors.h"
#include "deepshard/util/error.h"

namespace deepshard::checkpoint {
namespace {

bool ends_with_any(const std::string& name, const std::vector<std::string>& suffixes) {
  return std::any_of(suffixes.begin(), suffixes.end(), [&](const std::string& s) {
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  });
}

}  // namespace

void save_hf_safetensors(const std::map<std::string, at::Tensor>& params, const HfLayout& layout,
                         const std::string& path, at::ScalarType dtype) {
  TensorMap tensors;
  for (const auto& [name, value] : params) {
    at::Tensor t = value.detach();
    if (ends_with_any(name, layout.transposed_suffixes)) t = t.t();
    tensors[layout.prefix + name] = t.to(at::kCPU, dtype);
  }
  save_safetensors(path, tensors, {{"format", "pt"}});
}

std::vector<std::string> load_hf_safetensors(torch::nn::Module& model, const HfLayout& layout,
                                             const std::string& path) {
  SafetensorsContent file = load_safetensors(path);
  std::set<std::string> params;
  for (const auto& p : model.named_parameters()) params.insert(p.key());
  // The file's tensors by the model's names (the prefix stripped), without those that are not
  // parameters.
  TensorMap by_name;
  for (auto& [name, t] : file.tensors) {
    if (ends_with_any(name, layout.ignored_suffixes)) continue;
    const bool prefixed = !layout.prefix.empty() && name.rfind(layout.prefix, 0) == 0;
    std::string own = prefixed ? name.substr(layout.prefix.size()) : name;
    const bool optional = std::find(layout.optional_names.begin(), layout.optional_names.end(),
                                    own) != layout.optional_names.end();
    if (optional && !params.count(own)) continue;
    by_name[std::move(own)] = t;
  }
  torch::NoGradGuard no_grad;
  std::set<std::string> used;
  std::vector<std::string> fresh;
  for (auto& p : model.named_parameters()) {
    const std::string file_name = layout.prefix + p.key();
    auto it = by_name.find(p.key());
    if (it == by_name.end() &&
        std::find(layout.fresh_if_missing.begin(), layout.fresh_if_missing.end(), p.key()) !=
            layout.fresh_if_missing.end()) {
      fresh.push_back(p.key());
      continue;
    }
    if (it == by_name.end()) {
      const auto hint = layout.missing_hints.find(p.key());
      throw IoError(detail::concat(path, ": missing tensor '", file_name, "'",
                                   hint == layout.missing_hints.end() ? "" : hint->second));
    }
    const bool transposed = ends_with_any(p.key(), layout.transposed_suffixes);
    const at::Tensor t = transposed ? it->second.t() : it->second;
    DS_CHECK(t.sizes() == p.value().sizes(), IoError, path, ": tensor '", file_name, "' has shape ",
             it->second.sizes(), " but the model needs ",
             (transposed ? p.value().t() : p.value()).sizes());
    p.value().copy_(t);
    used.insert(p.key());
  }
  for (const auto& [name, t] : by_name)
    DS_CHECK(used.count(name), IoError, path, ": unexpected tensor '", layout.prefix + name, "'",
             layout.unexpected_hint);
  return fresh;
}

}  // namespace deepshard::checkpoint
