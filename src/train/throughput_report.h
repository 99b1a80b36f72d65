// summary.json's throughput figures: FLOPs per token from the model's shapes
// (train::training_flops_per_token), the GFLOP/s one rank achieved, and with wall_clock_breakdown
// the matmul peak of the rank (measured as `deepshard doctor` does, in the dtype the matmuls
// compute in: bf16 for a bf16 model on native bf16 arithmetic, fp32 otherwise; with the rank's
// threads) and the MFU = achieved / peak.
#pragma once

#include <c10/core/ScalarType.h>

#include <nlohmann/json.hpp>

namespace deepshard::train {

nlohmann::json throughput_json(double flops_per_token, double tokens_per_s, int world_size,
                               at::ScalarType dtype, bool measure_peak);

}  // namespace deepshard::train
