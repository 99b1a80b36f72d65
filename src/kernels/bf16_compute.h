// How a bf16 model's matmuls compute (`deepshard train --bf16-compute`,
// docs/performance.md): natively in
// bf16 (libtorch's kernels: oneDNN's AVX512-BF16/AMX dot products, which accumulate in fp32) or
// in fp32 from the bf16 operands (converted on the fly, each product accumulated in fp32 and its
// result rounded to bf16 once). Storage, communication and the optimizer stay bf16 either way: the
// parameters, activations kept for backward and gradients are bf16 tensors.
//
// Why: on a CPU without bf16 arithmetic libtorch 1.13 emulates it, about 19x slower than fp32, and
// without AVX-512 its generic bf16 GEMM accumulates two of the three products of a Linear layer
// (dX = dY W, dW = dYᵀ X) and the attention's products in bf16, so their error grows with the
// summed length (measured: 8.9e-2 of the largest element at k = 1152, against 2.0e-3 for an fp32
// accumulation rounded to bf16).
//
// The choice is made once per process at start (`deepshard train`; `deepshard doctor` prints it):
// "auto" computes in fp32 unless the CPU has bf16 arithmetic (cpuid: AVX512-BF16 or AMX-BF16) and
// libtorch's bf16 matmul passes a numeric check (every product within fp32 accumulation of a
// double-precision reference); "native" and "fp32" force one. The kernels that honour it:
// kernels::linear, kernels::matmul and kernels::causal_attention (the GPT's and Llama's matmuls).
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "platform/cpu_info.h"

namespace deepshard::kernels {

enum class Bf16Compute { kNative, kFp32 };

const char* to_string(Bf16Compute compute);

struct Bf16ComputeChoice {
  Bf16Compute compute = Bf16Compute::kNative;
  std::string reason;  // one line: why (the setting, the CPU, the check's result)
};

// The decision for `setting` ("auto", "native" or "fp32"; anything else throws UsageError naming
// `source`, where the user wrote it) on `cpu`. `native_check` runs the numeric check (true:
// accurate; fills its argument with the failing case otherwise); it is called only for "auto" on a
// CPU with bf16 arithmetic.
Bf16ComputeChoice choose_bf16_compute(std::string_view setting, const platform::CpuInfo& cpu,
                                      const std::function<bool(std::string*)>& native_check,
                                      std::string_view source = "--bf16-compute");

// The same with this machine's check (libtorch_bf16_matmul_accurate).
Bf16ComputeChoice choose_bf16_compute(std::string_view setting, const platform::CpuInfo& cpu,
                                      std::string_view source = "--bf16-compute");

// libtorch's bf16 products as the models call them (mm in the NN, TN and NT layouts, linear,
// batched matmul; k = 1024) against a double-precision reference of the same bf16 operands: true
// when every element is within 2^-8 of its magnitude (the bf16 rounding of the result) plus 1e-4
// of Σ|a||b| (fp32 accumulation); a bf16 accumulation is off by about 1e-2 of Σ|a||b| at this k.
bool libtorch_bf16_matmul_accurate(std::string* detail);

// The process-wide choice the kernels read (native until set). Set once at start, before any
// thread runs the model.
void set_bf16_compute(const Bf16ComputeChoice& choice);
Bf16Compute bf16_compute();
Bf16ComputeChoice bf16_compute_choice();

}  // namespace deepshard::kernels
