// Reading the pipeline and tensor_parallel sections inside parse_ds_config. Private to config.
#pragma once

#include "config/reader.h"
#include "deepshard/config/ds_config.h"
#include "deepshard/config/parallel_config.h"

namespace deepshard::config::detail {

// Reads both sections of `root` (declaring them) and records sizes > 1 in config.other_features
// as not supported yet ("pipeline.stages=2 (...)"), until an engine trains with them.
ParallelConfig parse_parallel(Section& root, DsConfig& config);

}  // namespace deepshard::config::detail
