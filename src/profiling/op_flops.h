// FLOPs and MACs of one ATen operator from its inputs, with DeepSpeed's flops-profiler rules
// (deepspeed/profiling/flops_profiler/profiler.py): linear 2·numel(x)·out, matmul 2·prod(a)·b[-1],
// addmm 2·MACs + numel(bias), layer_norm 5·numel (4 without affine), softmax / GELU / ReLU / SiLU
// numel, elementwise add/sub/mul/div numel of the broadcast result, embedding and dropout 0.
// Operators not listed count 0 (views, copies, the loss).
#pragma once

#include <ATen/core/ivalue.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <string_view>

namespace deepshard::profiling::detail {

struct OpCount {
  int64_t flops = 0;
  int64_t macs = 0;
  bool elementwise = false;  // add / sub / mul / div
};

OpCount op_flops(std::string_view op_name, c10::ArrayRef<const c10::IValue> inputs);

}  // namespace deepshard::profiling::detail
