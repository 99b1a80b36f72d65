// Slicing a whole parameter for a tensor rank and joining the slices back (tensor_slices.h).
#include "models/tensor_slices.h"

#include <ATen/ATen.h>

namespace deepshard::models {

at::Tensor tensor_slice(const at::Tensor& whole, TensorSplit split, int t, int n) {
  switch (split) {
    case TensorSplit::kReplicated:
      return whole;
    case TensorSplit::kRows:
      return whole.chunk(n, 0)[t];
    case TensorSplit::kColumns:
      return whole.chunk(n, 1)[t];
    case TensorSplit::kQkvRows: {
      // [3C, ...] = q, k, v stacked: rank t takes its heads' rows of each.
      std::vector<at::Tensor> parts;
      for (const at::Tensor& third : whole.chunk(3, 0)) parts.push_back(third.chunk(n, 0)[t]);
      return at::cat(parts, 0);
    }
  }
  return whole;
}

at::Tensor join_tensor_slices(const std::vector<at::Tensor>& slices, TensorSplit split) {
  switch (split) {
    case TensorSplit::kReplicated:
      return slices.front();
    case TensorSplit::kRows:
      return at::cat(slices, 0);
    case TensorSplit::kColumns:
      return at::cat(slices, 1);
    case TensorSplit::kQkvRows: {
      std::vector<at::Tensor> q, k, v;
      for (const at::Tensor& s : slices) {
        auto thirds = s.chunk(3, 0);
        q.push_back(thirds[0]);
        k.push_back(thirds[1]);
        v.push_back(thirds[2]);
      }
      return at::cat({at::cat(q, 0), at::cat(k, 0), at::cat(v, 0)}, 0);
    }
  }
  return slices.front();
}

}  // namespace deepshard::models
