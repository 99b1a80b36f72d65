// Megatron-LM's tensor-parallel GPT (Shoeybi et al. 2019) over deepshard's models::Gpt. Every rank
// of a tensor group builds the whole model with the same seed (so the initialisation is the
// single-rank run's), then TensorParallelGpt keeps in place only this rank's slices of the split
// parameters (tensor rank t of T):
//  - attn.c_attn (QKV, column-parallel): the rows of heads [t H/T, (t+1) H/T) of each of q, k, v;
//  - attn.c_proj (row-parallel): the matching input columns; its bias stays whole (added once,
//    after the all-reduce);
//  - mlp.c_fc (column-parallel): rows [t 4C/T, (t+1) 4C/T); mlp.c_proj (row-parallel): those
//    input columns, whole bias;
//  - wte (vocabulary-parallel, tied to the output head): rows [t V/T, (t+1) V/T).
// LayerNorms and wpe are replicated; their gradients are equal on every tensor rank (every input
// gradient of a column-parallel layer is all-reduced by f), so an engine over the data-parallel
// group treats the model like any other. Parameter names and the module tree are models::Gpt's.
// REQUIRES: dropout 0 (dropout inside the tensor region needs Megatron's model-parallel RNG
// tracker, not built yet), n_head, 4 n_embd and vocab_size divisible by T.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "deepshard/comm/group.h"
#include "deepshard/models/gpt.h"

namespace deepshard::parallel {

class TensorParallelGpt {
 public:
  // Shards `model` (whole, the same on every tensor rank) for this rank of `tensor` and installs
  // its tensor-parallel block runner. Throws Error naming the size that does not divide.
  TensorParallelGpt(models::Gpt model, comm::Group& tensor);

  // Mean cross-entropy of idx [B, T] against targets [B, T], the same on every tensor rank.
  at::Tensor loss(const at::Tensor& idx, const at::Tensor& targets);

  models::Gpt& model() { return model_; }
  comm::Group& tensor_group() { return tensor_; }
  // Whether the parameter called `name` (models::Gpt's names) is split over the tensor ranks.
  bool is_split(const std::string& name) const;
  // The dimension `name` is split along (0 rows, 1 columns), or -1 when replicated; with the
  // tensor size, this is what a checkpoint needs to rebuild the whole parameter.
  int split_dim(const std::string& name) const;
  // How many equal blocks the split dimension holds, each split over the tensor ranks separately
  // (3 for attn.c_attn's q, k and v rows; else 1): with split_dim, the slice's place in the whole
  // parameter (rank t holds the t-th chunk of every block).
  int split_blocks(const std::string& name) const;

  // The whole value of every parameter, gathered over the tensor group (collective), in
  // model().named_parameters() order: for tests and for saving weights.
  std::vector<std::pair<std::string, at::Tensor>> gather_full_parameters();

 private:
  at::Tensor block_forward(models::Block& block, const at::Tensor& x);

  models::Gpt model_;
  comm::Group& tensor_;
  int64_t vocab_start_ = 0;
};

}  // namespace deepshard::parallel
