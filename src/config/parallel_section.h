// Reading the pipeline and tensor_parallel sections inside parse_ds_config. Private to config.
#pragma once

#include "config/reader.h"
#include "deepshard/config/ds_config.h"
#include "deepshard/config/parallel_config.h"
#include "deepshard/config/run_config.h"

namespace deepshard::config::detail {

// Reads both sections of `root` (declaring them) and records in config.other_features what no
// engine trains yet: a pipeline with ZeRO stage 2/3, compression or the flops profiler
// ("zero_optimization.stage=2 with pipeline.stages=2 (...)"), tensor parallelism with
// compression ("tensor_parallel.size=2 with compression (...)").
ParallelConfig parse_parallel(Section& root, DsConfig& config);

// What a pipeline run (pipeline.stages > 1) does not do yet among the run's own sections
// (checkpoints, saved weights, sampling, recompute, evaluation, Llama), added to
// run.ds.other_features: "not supported yet: train.save_interval=5 with pipeline.stages=2 (...)".
void refuse_with_pipeline(RunConfig& run);

}  // namespace deepshard::config::detail
