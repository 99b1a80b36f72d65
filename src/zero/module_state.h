// ModuleState: what of a model the engine does not train but must keep consistent across ranks
// and checkpoints: its buffers and its frozen parameters (requires_grad false). Both stay whole on
// every rank at every stage (no gradient, no optimizer state, never changed by the engine); the
// engine makes them rank 0's at start (DeepSpeed broadcasts module state the same way) and a
// checkpoint saves them once (rank 0, module_state.safetensors in the tag directory) and restores
// them on every rank.
#pragma once

#include <torch/nn/module.h>

#include <string>
#include <utility>
#include <vector>

#include "deepshard/comm/group.h"

namespace deepshard::zero {

class ModuleState {
 public:
  ModuleState() = default;
  // The buffers (all of them) and frozen parameters of `model`, by their names in it (a tensor
  // registered twice once). Frozen parameters without elements (another pipeline stage's,
  // released on this rank) are not module state.
  explicit ModuleState(torch::nn::Module& model);

  bool empty() const { return tensors_.empty(); }
  const std::vector<std::pair<std::string, at::Tensor>>& tensors() const { return tensors_; }
  int64_t bytes() const;

  // Every rank's tensors become rank 0's (a collective).
  void broadcast(comm::Group& group);
  // Writes every tensor to `path` (safetensors).
  void save(const std::string& path) const;
  // Reads every tensor from `path`: a missing name or another shape is an IoError naming it.
  void load(const std::string& path);

 private:
  std::vector<std::pair<std::string, at::Tensor>> tensors_;
};

}  // namespace deepshard::zero
