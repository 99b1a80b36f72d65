// What the tensor-parallel models share: a whole causal language model, built the same on every
// rank of a tensor group with the same seed (so the initialisation is the single-rank run's; its
// blocks possibly split as they were built, tensor_slice_build.h), of which each rank keeps in
// place only its slices of the split parameters (the tensor-parallel plan its sharding plan
// declares, sharding/tensor_plan.h; the model's parameter names and module tree are unchanged);
// the loss over the tensor group; and the gather of the whole parameters. The trainer,
// the all-axes gradient norm (grad_norm.h) and the engine's model-parallel hook see this interface.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

#include "deepshard/comm/group.h"
#include "deepshard/models/causal_lm.h"
#include "deepshard/sharding/tensor_plan.h"

namespace deepshard::models {

class TensorSliceBuild;

class TensorParallelModel {
 public:
  virtual ~TensorParallelModel() = default;
  TensorParallelModel(const TensorParallelModel&) = delete;
  TensorParallelModel& operator=(const TensorParallelModel&) = delete;

  // Mean cross-entropy of idx [B, T] against targets [B, T], the same on every tensor rank:
  // head_loss(causal_lm()'s layers (run_layer: the tensor-parallel layer runner each model
  // installs) on embed(idx)).
  at::Tensor loss(const at::Tensor& idx, const at::Tensor& targets);
  // The loss's parts (a pipeline stage of the tensor-parallel model runs some of them): the
  // vocabulary-parallel embedding, idx [B, T] -> hidden [B, T, C], the same on every tensor rank;
  // the final norm, the head on this rank's vocabulary rows and the vocabulary-parallel
  // cross-entropy against targets [B, T].
  virtual at::Tensor embed(const at::Tensor& idx) = 0;
  virtual at::Tensor head_loss(const at::Tensor& hidden, const at::Tensor& targets) = 0;

  // The split model (this rank's slices, the replicated parameters whole).
  virtual models::CausalLmImpl& causal_lm() = 0;
  comm::Group& tensor_group() { return tensor_; }

  // Whether the parameter called `name` (the model's names) is split over the tensor ranks.
  bool is_split(const std::string& name) const;
  // The dimension `name` is split along (0 rows, 1 columns), or -1 when replicated; with the
  // tensor size, this is what a checkpoint needs to rebuild the whole parameter.
  int split_dim(const std::string& name) const;
  // The model's tensor-parallel plan: how every parameter is split.
  const sharding::TensorPlan& tensor_plan() const { return plan_; }

  // The whole value of every parameter, gathered over the tensor group (collective), in
  // causal_lm().named_parameters() order: for tests and for saving weights.
  std::vector<std::pair<std::string, at::Tensor>> gather_full_parameters();

 protected:
  // `vocab_size`: the model's vocabulary (split in T rows ranges; this rank's starts at
  // vocab_start()). Throws Error naming model.vocab_size when T does not divide it. `plan`: the
  // model's tensor-parallel plan. `built`: the hook that split the blocks as the model was built
  // (tensor_slice_build.h), or null.
  TensorParallelModel(comm::Group& tensor, int64_t vocab_size, sharding::TensorPlan plan,
                      const TensorSliceBuild* built);
  // Replaces every split parameter of causal_lm() by a copy of this rank's slice (in place: the
  // parameter objects, and so the module tree, stay), except those split as they were built.
  void keep_slices();
  int64_t vocab_start() const { return vocab_start_; }
  // Throws Error unless idx and targets are [B, T] int64 with T <= the model's context length.
  void check_batch(const at::Tensor& idx, const at::Tensor& targets);

 private:
  comm::Group& tensor_;
  sharding::TensorPlan plan_;
  const TensorSliceBuild* built_;
  int64_t vocab_start_ = 0;
};

// Throws Error "tensor_parallel.size T: model.<key> N is not divisible by it (<why>)" unless T
// divides `value`.
void require_divisible(const comm::Group& tensor, const char* key, int64_t value, const char* why);

}  // namespace deepshard::models
