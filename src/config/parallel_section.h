// Reading the pipeline and tensor_parallel sections inside parse_ds_config. Private to config.
#pragma once

#include "config/reader.h"
#include "deepshard/config/ds_config.h"
#include "deepshard/config/parallel_config.h"

namespace deepshard::config::detail {

// Reads both sections of `root` (declaring them) and records in config.other_features what no
// engine trains yet: pipeline stages > 1 ("pipeline.stages=2 (...)"), tensor parallelism with
// fp16/bf16 or compression ("tensor_parallel.size=2 with bf16.enabled (...)").
ParallelConfig parse_parallel(Section& root, DsConfig& config);

}  // namespace deepshard::config::detail
