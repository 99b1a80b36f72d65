// QuantizedGather: one ZeRO-3 unit gather with ZeRO++'s quantized weights (qwZ,
// zero_quantized_weights). This rank's slice is quantized to int8 in blocks of kBlock elements
// with one fp32 scale per block (block-wise symmetric, kernels/int8_quantize.h); the int8 values
// and the scales are all-gathered (two collectives in flight together), and wait() dequantizes
// every rank's slice into the unit's flat storage. On the wire: a quarter of fp32's bytes (half of
// bf16's) plus 4 bytes per block. The slices themselves (the optimizer's master in fp32) are never
// quantized: only the gathered copy the forward and backward compute with is.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "deepshard/comm/group.h"

namespace deepshard::zero {

class QuantizedGather {
 public:
  // DeepSpeed's quantizer aims for groups below 8000 elements (4096 is the size it names optimal).
  static constexpr int64_t kBlock = 4096;

  // Starts the gather of `slice` (this rank's; fp32 or bf16) into `out` (group.size() slices,
  // contiguous, the slice's dtype). Throws Error naming zero_quantized_weights for another dtype.
  QuantizedGather(comm::Group& group, const at::Tensor& out, const at::Tensor& slice);
  // Waits for both collectives and dequantizes into `out`.
  void wait();

  // Bytes this rank hands the collectives for a slice of `numel` elements.
  static int64_t wire_bytes(int64_t numel) { return numel + 4 * ((numel + kBlock - 1) / kBlock); }

 private:
  at::Tensor out_;
  at::Tensor mine_values_, mine_scales_;  // this rank's quantized slice (kept until the wait)
  at::Tensor values_, scales_;            // every rank's
  comm::Work values_work_, scales_work_;
  int ranks_ = 0;
};

}  // namespace deepshard::zero
