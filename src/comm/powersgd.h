// PowerSGD gradient compression with error feedback (Vogels et al. 2019, "PowerSGD: Practical
// Low-Rank Gradient Compression for Distributed Optimization"), following PyTorch's DDP
// `powerSGD_hook` on one bucket holding the whole flat gradient:
//  1. before `start_compressing_after_step` optimizer steps: a plain mean all-reduce;
//  2. then: add the error of the previous step (error feedback) and keep a copy;
//  3. every parameter's gradient is viewed as a matrix (first dim x the rest); it is compressed if
//     (rows + cols) * r * min_compression_rate < rows * cols (r = min(rank, rows, cols)), else
//     (vectors, small matrices) it joins one buffer that is mean all-reduced uncompressed;
//  4. per compressed M: Q (cols x r) is reused from the previous step (warm start) or drawn from a
//     normal distribution seeded identically on every rank, and orthogonalised; P = M Q; all-reduce
//     all Ps (sum); orthogonalise each P (Gram-Schmidt); Q = M^T P; all-reduce all Qs, divide by N;
//     M <- P Q^T;
//  5. error = the copy - the result (local residual, added to the next step's gradient).
// Its state (error buffer, Q memory, whether Q exists) is what a checkpoint must keep.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "deepshard/comm/group.h"

namespace deepshard::comm {

struct PowerSgdOptions {
  int64_t matrix_approximation_rank = 1;
  int64_t start_compressing_after_step = 1000;  // PyTorch's start_powerSGD_iter
  double min_compression_rate = 2.0;
  bool use_error_feedback = true;
  bool warm_start = true;
  double orthogonalization_epsilon = 0.0;
  int64_t random_seed = 0;
};

// One parameter's gradient in the flat buffer: `numel` elements at `offset`, of shape `shape`.
struct GradientTensor {
  int64_t offset = 0;
  std::vector<int64_t> shape;
};

class PowerSgd {
 public:
  // `tensors`: the parameters' gradients inside a flat buffer of `flat_numel` elements (gaps and
  // padding are all-reduced uncompressed). Throws Error on a bad option.
  PowerSgd(Group& group, PowerSgdOptions options, std::vector<GradientTensor> tensors,
           int64_t flat_numel);

  // In place over `grads` (flat_numel elements, fp32 or fp64, contiguous): the (approximated)
  // mean over ranks. `step`: optimizer steps completed before this one.
  void all_reduce_mean(const at::Tensor& grads, int64_t step);
  bool compressing(int64_t step) const { return step >= options_.start_compressing_after_step; }

  // Elements all-reduced per compressed step (uncompressed part + Ps + Qs), and without it.
  int64_t compressed_numel() const;
  int64_t flat_numel() const { return flat_numel_; }
  // Bytes of the buffers a compressed step holds at its peak (error and its input copy, the
  // uncompressed buffer, P and Q), for the memory ledger.
  int64_t buffer_bytes(int64_t element_size) const;

  // Checkpoint state: "error" (flat_numel), "q" (the Q memory), "q_ready" (1 if Q holds a value
  // to warm-start from). load_state checks the sizes.
  std::map<std::string, at::Tensor> state() const;
  void load_state(const std::map<std::string, at::Tensor>& state);

  const PowerSgdOptions& options() const { return options_; }

 private:
  struct Matrix {
    int64_t offset, rows, cols, rank, p_offset, q_offset;
  };
  struct Range {
    int64_t offset, numel;
  };
  void orthogonalize(const at::Tensor& m) const;

  Group& group_;
  PowerSgdOptions options_;
  int64_t flat_numel_;
  std::vector<Matrix> matrices_;     // compressed
  std::vector<Range> uncompressed_;  // everything else, in flat order
  int64_t uncompressed_numel_ = 0, p_numel_ = 0, q_numel_ = 0;
  at::Tensor error_, p_memory_, q_memory_;
  bool q_ready_ = false;
};

}  // namespace deepshard::comm
