// Implementation of the chunked gradient norms (see grad_norm.h).
#include "zero/grad_norm.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "deepshard/comm/group.h"

namespace deepshard::zero {
namespace {

// The squared L2 norm of one chunk (at most kNormChunk elements) as a 1-element double tensor.
at::Tensor squared_chunk_norm(const at::Tensor& chunk) {
  if (chunk.scalar_type() == at::kFloat) {
    const at::Tensor norm = at::linalg_vector_norm(chunk, 2);
    if (std::isfinite(norm.item<float>())) return norm.to(at::kDouble).square().reshape({1});
  }
  return at::linalg_vector_norm(chunk, 2, {}, false, at::kDouble).square().reshape({1});
}

}  // namespace

at::Tensor squared_l2_norm(const at::Tensor& t) {
  const at::Tensor flat = t.reshape({-1});
  if (flat.numel() <= kNormChunk) return squared_chunk_norm(flat);
  at::Tensor sum = at::zeros({1}, flat.options().dtype(at::kDouble));
  for (int64_t at = 0; at < flat.numel(); at += kNormChunk) {
    sum.add_(squared_chunk_norm(flat.narrow(0, at, std::min(kNormChunk, flat.numel() - at))));
  }
  return sum;
}

double l2_norm(const at::Tensor& t) { return std::sqrt(squared_l2_norm(t).item<double>()); }

double sharded_l2_norm(comm::Group& group, const at::Tensor& shard) {
  at::Tensor squares = squared_l2_norm(shard);
  group.all_reduce(squares, comm::ReduceOp::kSum);
  return std::sqrt(squares.item<double>());
}

}  // namespace deepshard::zero
