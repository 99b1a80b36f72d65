// A whole parameter cut into the slices of the tensor ranks, and the whole rebuilt from them, by
// its split in the model's tensor-parallel plan (sharding/tensor_plan.h; for the tensor-parallel
// models, their gathered parameters and checkpoints that reshard across tensor sizes).
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

#include "deepshard/sharding/tensor_plan.h"

namespace deepshard::models {

using sharding::TensorSplit;

// Tensor rank t's (of n) slice of `whole` (a view; `whole` itself when replicated).
at::Tensor tensor_slice(const at::Tensor& whole, TensorSplit split, int t, int n);

// The whole parameter from the n slices in tensor-rank order (the first when replicated).
at::Tensor join_tensor_slices(const std::vector<at::Tensor>& slices, TensorSplit split);

}  // namespace deepshard::models
