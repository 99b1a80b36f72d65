// Implementation of the chunked gradient norms (see grad_norm.h).
#include "zero/grad_norm.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "deepshard/comm/group.h"

namespace deepshard::zero {
namespace {

at::Tensor norm_of(const at::Tensor& t) {
  return at::linalg_vector_norm(t, 2, {}, false, at::kDouble);
}

}  // namespace

at::Tensor squared_l2_norm(const at::Tensor& t) {
  const at::Tensor flat = t.reshape({-1});
  if (flat.numel() <= kNormChunk) return norm_of(flat).square().reshape({1});
  at::Tensor sum = at::zeros({1}, flat.options().dtype(at::kDouble));
  for (int64_t at = 0; at < flat.numel(); at += kNormChunk) {
    sum.add_(norm_of(flat.narrow(0, at, std::min(kNormChunk, flat.numel() - at))).square());
  }
  return sum;
}

double l2_norm(const at::Tensor& t) {
  if (t.numel() <= kNormChunk) return norm_of(t).item<double>();
  return std::sqrt(squared_l2_norm(t).item<double>());
}

double sharded_l2_norm(comm::Group& group, const at::Tensor& shard) {
  at::Tensor squares = squared_l2_norm(shard);
  group.all_reduce(squares, comm::ReduceOp::kSum);
  return std::sqrt(squares.item<double>());
}

}  // namespace deepshard::zero
