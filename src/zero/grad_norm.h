// L2 norms of gradient buffers in double precision without a double copy of the buffer: libtorch's
// linalg_vector_norm(t, 2, {}, false, kDouble) casts the whole input to double first, which for a
// 1e9-element fp32 gradient shard is an 8 GB transient (it made the 2B-parameter NVMe run run out
// of memory). Buffers up to kNormChunk elements are normed in one call (bit-identical to that
// call); larger ones chunk by chunk, summing the chunks' squared norms in double.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace deepshard::comm {
class Group;
}

namespace deepshard::zero {

inline constexpr int64_t kNormChunk = int64_t{1} << 24;  // 16M elements: a 128 MB double transient

// The squared L2 norm of `t` (any floating dtype), as a 1-element double tensor on t's device.
at::Tensor squared_l2_norm(const at::Tensor& t);

// The L2 norm of `t` in double.
double l2_norm(const at::Tensor& t);

// The global L2 norm of a gradient sharded over `group` (every element owned by one rank, padding
// zero): the root of the all-reduced sum of the ranks' squared shard norms. A collective.
double sharded_l2_norm(comm::Group& group, const at::Tensor& shard);

}  // namespace deepshard::zero
