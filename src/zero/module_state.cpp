// Implementation of ModuleState (see module_state.h).
#include "zero/module_state.h"

#include <torch/torch.h>

#include <unordered_set>

#include "deepshard/checkpoint/safetensors.h"
#include "deepshard/util/error.h"

namespace deepshard::zero {

ModuleState::ModuleState(torch::nn::Module& model) {
  std::unordered_set<const void*> seen;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    const at::Tensor& p = item.value();
    // A frozen parameter without elements is another pipeline stage's, released on this one
    // (parallel/pipeline_stage.h): that stage trains and checkpoints it.
    if (!p.requires_grad() && p.numel() > 0 && seen.insert(p.unsafeGetTensorImpl()).second)
      tensors_.emplace_back(item.key(), p);
  }
  for (const auto& item : model.named_buffers(/*recurse=*/true)) {
    if (item.value().defined() && seen.insert(item.value().unsafeGetTensorImpl()).second)
      tensors_.emplace_back(item.key(), item.value());
  }
}

int64_t ModuleState::bytes() const {
  int64_t n = 0;
  for (const auto& [name, t] : tensors_) n += t.numel() * t.element_size();
  return n;
}

void ModuleState::broadcast(comm::Group& group) {
  if (group.size() == 1) return;
  torch::NoGradGuard no_grad;
  for (auto& [name, t] : tensors_) {
    if (t.numel() == 0) continue;
    DS_CHECK(t.is_contiguous(), Error, "module state ", name,
             " is not contiguous; deepshard broadcasts buffers and frozen parameters in place");
    group.broadcast(t, 0);
  }
}

void ModuleState::save(const std::string& path) const {
  checkpoint::TensorMap map;
  for (const auto& [name, t] : tensors_) map.emplace(name, t);
  checkpoint::save_safetensors(path, map, {{"format", "deepshard module state"}});
}

void ModuleState::load(const std::string& path) {
  const auto content = checkpoint::load_safetensors(path);
  torch::NoGradGuard no_grad;
  for (auto& [name, t] : tensors_) {
    auto it = content.tensors.find(name);
    DS_CHECK(it != content.tensors.end(), IoError, path, ": checkpoint of a different model: '",
             name, "' (a buffer or frozen parameter of this model) is not in it");
    DS_CHECK(it->second.sizes() == t.sizes(), IoError, path, ": '", name, "' has shape ",
             it->second.sizes(), " in the checkpoint but ", t.sizes(), " in this model");
    t.copy_(it->second);
  }
  for (const auto& [name, saved] : content.tensors) {
    bool known = false;
    for (const auto& item : tensors_) known = known || item.first == name;
    DS_CHECK(known, IoError, path, ": checkpoint of a different model: its module state '", name,
             "' is not in this model");
  }
}

}  // namespace deepshard::zero
