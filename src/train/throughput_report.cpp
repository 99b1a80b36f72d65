// FLOPs per token, achieved GFLOP/s and MFU (throughput_report.h).
#include "train/throughput_report.h"

#include "kernels/bf16_compute.h"
#include "train/matmul_peak.h"

namespace deepshard::train {

nlohmann::json throughput_json(double flops_per_token, double tokens_per_s, int world_size,
                               at::ScalarType dtype, bool measure_peak) {
  const double flops = flops_per_token;
  const double achieved = flops * tokens_per_s / double(world_size) / 1e9;  // per rank
  nlohmann::json out = {{"flops_per_token", flops}, {"achieved_gflops_per_rank", achieved}};
  if (measure_peak) {
    // The peak of the arithmetic the matmuls run: a bf16 model computed in fp32
    // (kernels/bf16_compute.h) multiplies at the fp32 peak; libtorch's bf16 peak there is that of
    // its emulated bf16 GEMM (0.3 GFLOP/s against ~100 measured on an AVX2 path), which no layer
    // runs, and would give an MFU of several hundred percent.
    const bool bf16_arithmetic =
        dtype == at::kBFloat16 && kernels::bf16_compute() == kernels::Bf16Compute::kNative;
    const double peak = measure_matmul_gflops(bf16_arithmetic ? at::kBFloat16 : at::kFloat);
    out["matmul_peak_gflops_per_rank"] = peak;
    out["matmul_peak_dtype"] = bf16_arithmetic ? "bf16" : "fp32";
    out["mfu"] = peak > 0 ? achieved / peak : 0.0;
  }
  return out;
}

}  // namespace deepshard::train
