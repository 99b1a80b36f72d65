// FLOPs per token, achieved GFLOP/s and MFU (throughput_report.h).
#include "train/throughput_report.h"

#include "train/matmul_peak.h"

namespace deepshard::train {

nlohmann::json throughput_json(double flops_per_token, double tokens_per_s, int world_size,
                               at::ScalarType dtype, bool measure_peak) {
  const double flops = flops_per_token;
  const double achieved = flops * tokens_per_s / double(world_size) / 1e9;  // per rank
  nlohmann::json out = {{"flops_per_token", flops}, {"achieved_gflops_per_rank", achieved}};
  if (measure_peak) {
    const double peak = measure_matmul_gflops(dtype == at::kBFloat16 ? at::kBFloat16 : at::kFloat);
    out["matmul_peak_gflops_per_rank"] = peak;
    out["mfu"] = peak > 0 ? achieved / peak : 0.0;
  }
  return out;
}

}  // namespace deepshard::train
