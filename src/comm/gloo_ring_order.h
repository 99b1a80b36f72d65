// The summation order of Gloo's ring all-reduce (gloo/allreduce.cc in the Gloo that libtorch 1.13
// ships, the algorithm ProcessGroupGloo::allreduce runs), so that another transport can reproduce
// its results bit for bit. Gloo cuts the buffer into numSegments = roundUp(max(ceil(bytes / 1 MiB),
// 2N), N) segments of roundUp(ceil(bytes / numSegments), element size) bytes; chunk c is the c-th
// run of numSegments / N segments. Rank c ends up owning chunk c, summed as it travelled the ring:
//   x_c + (x_{c+1} + (... + (x_{c+N-2} + x_{c+N-1})))     (rank indices mod N)
// and then broadcasts it. Floating-point addition is commutative, so only this nesting matters.
#pragma once

#include <cstdint>

namespace deepshard::comm {

// Elements per chunk of Gloo's ring all-reduce of `numel` elements of `element_size` bytes over
// `world_size` ranks: chunk c holds elements [c * size, (c + 1) * size) (the last ones may be
// short or empty).
int64_t gloo_ring_chunk_elements(int64_t numel, int64_t element_size, int world_size);

}  // namespace deepshard::comm
