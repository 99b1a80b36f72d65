// What the tensor-parallel models (TensorParallelGpt, TensorParallelLlama) share: a whole causal
// language model, built the same on every rank of a tensor group with the same seed (so the
// initialisation is the single-rank run's; its blocks possibly split as they were built,
// tensor_slice_build.h), of which each rank keeps in place only its slices of
// the split parameters (tensor_split.h's rule; the model's parameter names and module tree are
// unchanged); the loss over the tensor group; and the gather of the whole parameters. The trainer,
// the all-axes gradient norm (grad_norm.h) and the engine's model-parallel hook see this interface.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

#include "deepshard/comm/group.h"
#include "deepshard/models/causal_lm.h"

namespace deepshard::parallel {

class TensorSliceBuild;

class TensorParallelModel {
 public:
  virtual ~TensorParallelModel() = default;
  TensorParallelModel(const TensorParallelModel&) = delete;
  TensorParallelModel& operator=(const TensorParallelModel&) = delete;

  // Mean cross-entropy of idx [B, T] against targets [B, T], the same on every tensor rank.
  virtual at::Tensor loss(const at::Tensor& idx, const at::Tensor& targets) = 0;

  // The split model (this rank's slices, the replicated parameters whole).
  virtual models::CausalLmImpl& causal_lm() = 0;
  comm::Group& tensor_group() { return tensor_; }

  // Whether the parameter called `name` (the model's names) is split over the tensor ranks.
  bool is_split(const std::string& name) const;
  // The dimension `name` is split along (0 rows, 1 columns), or -1 when replicated; with the
  // tensor size, this is what a checkpoint needs to rebuild the whole parameter.
  int split_dim(const std::string& name) const;

  // The whole value of every parameter, gathered over the tensor group (collective), in
  // causal_lm().named_parameters() order: for tests and for saving weights.
  std::vector<std::pair<std::string, at::Tensor>> gather_full_parameters();

 protected:
  // `vocab_size`: the model's vocabulary (split in T rows ranges; this rank's starts at
  // vocab_start()). Throws Error naming model.vocab_size when T does not divide it. `built`: the
  // hook that split the blocks as the model was built (tensor_slice_build.h), or null.
  TensorParallelModel(comm::Group& tensor, int64_t vocab_size, const TensorSliceBuild* built);
  // Replaces every split parameter of causal_lm() by a copy of this rank's slice (in place: the
  // parameter objects, and so the module tree, stay), except those split as they were built.
  void keep_slices();
  int64_t vocab_start() const { return vocab_start_; }
  // Throws Error unless idx and targets are [B, T] int64 with T <= the model's context length.
  void check_batch(const at::Tensor& idx, const at::Tensor& targets);

 private:
  comm::Group& tensor_;
  const TensorSliceBuild* built_;
  int64_t vocab_start_ = 0;
};

// Throws Error "tensor_parallel.size T: model.<key> N is not divisible by it (<why>)" unless T
// divides `value`.
void require_divisible(const comm::Group& tensor, const char* key, int64_t value, const char* why);

}  // namespace deepshard::parallel
