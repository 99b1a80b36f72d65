// Where a rank's parameter lies in the whole model's parameter of the same name, for checkpoints of
// model-parallel runs (docs/checkpoint.md, "Tensor-parallel layout"). Records always name ranges of
// the WHOLE parameter's flattened elements, so a checkpoint reshards across tensor sizes: a rank
// maps each range of its local slice to the whole-parameter ranges that hold it.
//
// A split parameter is cut along `dim`, which consists of `blocks` equal blocks (3 for fused q, k,
// v rows, else 1); each block is cut into `size` equal chunks and tensor rank `rank` holds chunk
// `rank` of every block, concatenated along `dim` in block order. dim -1: the whole parameter
// (replicated over the tensor ranks).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace deepshard::checkpoint {

struct TensorSlice {
  int dim = -1;        // split dimension; -1 = the whole parameter
  int blocks = 1;      // equal blocks along dim, each split over the ranks
  int rank = 0;        // this rank's index on the tensor axis
  int size = 1;        // the tensor axis' size
  bool writes = true;  // whether this rank writes the parameter (a replicated one: one rank only)

  bool split() const { return dim >= 0 && size > 1; }
};

// The whole parameter's shape from this rank's slice shape. Throws Error when `slice` does not fit
// the shape (dim out of range).
std::vector<int64_t> whole_shape(const std::vector<int64_t>& local_shape, const TensorSlice& slice);

// The element ranges [begin, end) of the whole parameter (shape `whole`, flattened row-major) that
// hold elements [begin, end) of this rank's flattened slice, in the slice's order (which is also
// increasing, disjoint, adjacent ranges merged). Throws Error when the whole shape does not divide
// into blocks x size along dim.
std::vector<std::pair<int64_t, int64_t>> whole_ranges(const std::vector<int64_t>& whole,
                                                      const TensorSlice& slice, int64_t begin,
                                                      int64_t end);

}  // namespace deepshard::checkpoint
