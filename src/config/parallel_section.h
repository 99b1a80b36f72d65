// Reading the pipeline and tensor_parallel sections inside parse_ds_config. Private to config.
#pragma once

#include "config/reader.h"
#include "deepshard/config/ds_config.h"
#include "deepshard/config/parallel_config.h"

namespace deepshard::config::detail {

// Reads both sections of `root` (declaring them) and records in config.other_features what no
// engine trains yet: a pipeline with ZeRO stage 2/3, compression or the flops profiler
// ("zero_optimization.stage=2 with pipeline.stages=2 (...)"), tensor parallelism with
// compression ("tensor_parallel.size=2 with compression (...)").
ParallelConfig parse_parallel(Section& root, DsConfig& config);

}  // namespace deepshard::config::detail
