// Implementation of QuantizedGather, ZeRO++'s quantized weight gather (see quantized_gather.h).
#include "zero/stage3/quantized_gather.h"

#include <ATen/ATen.h>

#include "deepshard/util/error.h"
#include "kernels/int8_quantize.h"

namespace deepshard::zero {

QuantizedGather::QuantizedGather(comm::Group& group, const at::Tensor& out, const at::Tensor& slice)
    : out_(out), ranks_(group.size()) {
  DS_CHECK(slice.scalar_type() == at::kFloat || slice.scalar_type() == at::kBFloat16, Error,
           "zero_optimization.zero_quantized_weights: parameters of dtype ",
           c10::toString(slice.scalar_type()),
           " cannot be quantized (fp32 and bf16 can; use bf16 instead of fp16)");
  kernels::Int8Blocks mine = kernels::quantize_int8(slice.contiguous(), kBlock);
  mine_values_ = mine.values;
  mine_scales_ = mine.scales;
  values_ = at::empty({ranks_ * mine_values_.numel()}, mine_values_.options());
  scales_ = at::empty({ranks_ * mine_scales_.numel()}, mine_scales_.options());
  values_work_ = group.all_gather_async(values_, mine_values_);
  scales_work_ = group.all_gather_async(scales_, mine_scales_);
}

void QuantizedGather::wait() {
  values_work_.wait();
  scales_work_.wait();
  const int64_t n = mine_values_.numel(), blocks = mine_scales_.numel();
  at::Tensor flat = out_.view({-1});
  for (int r = 0; r < ranks_; ++r) {
    kernels::Int8Blocks slice{values_.narrow(0, r * n, n), scales_.narrow(0, r * blocks, blocks),
                              kBlock};
    kernels::dequantize_int8(slice, flat.narrow(0, r * n, n));
  }
  mine_values_ = mine_scales_ = values_ = scales_ = at::Tensor();
}

}  // namespace deepshard::zero
