// A kernel call as an operator that at::RecordFunction observers see (the flops profiler counts
// deepshard::linear as aten::linear), for kernels that call no ATen operator of their own.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <functional>
#include <vector>

namespace deepshard::kernels {

// Runs `f` inside a RecordFunction named `name` with `inputs` (read by observers at its start).
at::Tensor record_op(const char* name, std::vector<c10::IValue> inputs,
                     const std::function<at::Tensor()>& f);

}  // namespace deepshard::kernels
