// L2 norms of gradient buffers, summed in double precision without a double copy of the buffer:
// libtorch's linalg_vector_norm(t, 2, {}, false, kDouble) casts the whole input to double first,
// which for a 1e9-element fp32 gradient shard is an 8 GB transient (it made the 2B-parameter NVMe
// run run out of memory), and even at 3M elements costs 30x the fp32 norm (measured on this
// machine's Xeon at one thread: 16.6 ms against 0.57 ms of CPU time), about 5 % of a small GPT's
// step. An fp32 buffer is normed kNormChunk elements at a time in fp32 (libtorch's vectorised
// cascade sum: relative error about 1e-7) and the chunks' squares summed in double; a chunk whose
// fp32 norm is not finite (an inf or nan in it, or squares past fp32's range) is normed again in
// double, so an overflow is one exactly when the elements overflowed. Other dtypes (bf16, fp16,
// double) are normed in double chunk by chunk.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace deepshard::comm {
class Group;
}

namespace deepshard::zero {

inline constexpr int64_t kNormChunk = int64_t{1} << 24;  // 16M elements (a double chunk: 128 MB)

// The squared L2 norm of `t` (any floating dtype), as a 1-element double tensor on t's device.
at::Tensor squared_l2_norm(const at::Tensor& t);

// The L2 norm of `t` in double.
double l2_norm(const at::Tensor& t);

// The global L2 norm of a gradient sharded over `group` (every element owned by one rank, padding
// zero): the root of the all-reduced sum of the ranks' squared shard norms. A collective.
double sharded_l2_norm(comm::Group& group, const at::Tensor& shard);

}  // namespace deepshard::zero
