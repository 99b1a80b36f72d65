// Implementation of gloo_ring_order.h: the segment arithmetic of Gloo's ring all-reduce.
#include "comm/gloo_ring_order.h"

#include <algorithm>

namespace deepshard::comm {
namespace {

constexpr int64_t kGlooMaxSegmentBytes = 1024 * 1024;  // AllreduceOptionsImpl::kMaxSegmentSize

int64_t round_up(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

}  // namespace

int64_t gloo_ring_chunk_elements(int64_t numel, int64_t element_size, int world_size) {
  const int64_t total = numel * element_size;
  const int64_t max_segment = element_size * std::max<int64_t>(1, kGlooMaxSegmentBytes / element_size);
  const int64_t segments =
      round_up(std::max<int64_t>((total + max_segment - 1) / max_segment, 2 * world_size),
               world_size);
  const int64_t segment_bytes = round_up((total + segments - 1) / segments, element_size);
  return segments / world_size * segment_bytes / element_size;
}

}  // namespace deepshard::comm
