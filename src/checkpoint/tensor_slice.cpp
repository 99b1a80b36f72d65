// A tensor-parallel slice's place in the whole parameter (tensor_slice.h).
#include "deepshard/checkpoint/tensor_slice.h"

#include <algorithm>

#include "deepshard/util/error.h"

namespace deepshard::checkpoint {

std::vector<int64_t> whole_shape(const std::vector<int64_t>& local_shape,
                                 const TensorSlice& slice) {
  std::vector<int64_t> out = local_shape;
  if (!slice.split()) return out;
  DS_CHECK(slice.dim < static_cast<int>(out.size()), Error, "tensor slice: dimension ", slice.dim,
           " of a ", out.size(), "-d parameter");
  out[slice.dim] *= slice.size;
  return out;
}

std::vector<std::pair<int64_t, int64_t>> whole_ranges(const std::vector<int64_t>& whole,
                                                      const TensorSlice& slice, int64_t begin,
                                                      int64_t end) {
  std::vector<std::pair<int64_t, int64_t>> out;
  if (begin >= end) return out;
  if (!slice.split()) {
    out.emplace_back(begin, end);
    return out;
  }
  DS_CHECK(slice.dim < static_cast<int>(whole.size()) && slice.blocks >= 1 && slice.rank >= 0 &&
               slice.rank < slice.size,
           Error, "tensor slice: dimension ", slice.dim, ", ", slice.blocks, " block(s), rank ",
           slice.rank, " of ", slice.size, " for a ", whole.size(), "-d parameter");
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < slice.dim; ++d) outer *= whole[d];
  for (size_t d = slice.dim + 1; d < whole.size(); ++d) inner *= whole[d];
  const int64_t extent = whole[slice.dim];
  DS_CHECK(extent % (slice.blocks * slice.size) == 0, Error, "tensor slice: dimension ", slice.dim,
           " of size ", extent, " does not split into ", slice.blocks, " block(s) x ", slice.size,
           " ranks");
  const int64_t block = extent / slice.blocks, chunk = block / slice.size;
  // The slice is a sequence of runs of `run` elements, run j = (o, p) for outer index o and block
  // p, each contiguous in the whole parameter.
  const int64_t run = chunk * inner;
  if (run == 0) return out;
  DS_CHECK(end <= outer * slice.blocks * run, Error, "tensor slice: elements [", begin, ":", end,
           ") of a slice of ", outer * slice.blocks * run);
  for (int64_t j = begin / run; j * run < end; ++j) {
    const int64_t o = j / slice.blocks, p = j % slice.blocks;
    const int64_t start = o * extent * inner + (p * block + slice.rank * chunk) * inner;
    const int64_t lo = std::max(begin, j * run) - j * run,
                  hi = std::min(end, (j + 1) * run) - j * run;
    if (!out.empty() && out.back().second == start + lo) {
      out.back().second = start + hi;
    } else {
      out.emplace_back(start + lo, start + hi);
    }
  }
  return out;
}

}  // namespace deepshard::checkpoint
