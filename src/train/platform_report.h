// What summary.json says about the machine a run used: CPU, ISA, the OpenBLAS core and the
// OPENBLAS_CORETYPE the rank ran with, intra-op threads, how bf16 models multiply
// (kernels/bf16_compute.h).
#pragma once

#include <nlohmann/json.hpp>

namespace deepshard::train {

nlohmann::json platform_json();

}  // namespace deepshard::train
