// A whole parameter cut into the slices of the tensor ranks, and the whole rebuilt from them, by
// the split rule of tensor_split.h (for the tensor-parallel models, their gathered parameters and
// checkpoints that reshard across tensor sizes).
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

#include "deepshard/parallel/tensor_split.h"

namespace deepshard::parallel {

// Tensor rank t's (of n) slice of `whole` (a view; `whole` itself when replicated).
at::Tensor tensor_slice(const at::Tensor& whole, TensorSplit split, int t, int n);

// The whole parameter from the n slices in tensor-rank order (the first when replicated).
at::Tensor join_tensor_slices(const std::vector<at::Tensor>& slices, TensorSplit split);

}  // namespace deepshard::parallel
