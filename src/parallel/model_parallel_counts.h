// The parameters one rank holds when a model is split over T tensor ranks and S pipeline stages,
// from the model's parameter list alone (models/parameter_shapes.h: no model built, no group):
// the estimator's input (`deepshard estimate --tensor T --pipeline S`). The rules are the real
// ones: the model's tensor-parallel plan (sharding/tensor_plan.h: a split parameter holds 1/T of
// its elements on each tensor rank), and the pipeline partition of pipeline_partition.h over the
// items [embedding, block 0 .. block n-1, head] (each shape's item), uniform by block count, or
// parameters by whole parameter counts as partition_model does; the embedding on the first stage,
// the final norm and head on the last, which also holds its own copy of an embedding the head is
// tied to (pipeline_stage.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "deepshard/models/parameter_shapes.h"
#include "parallel/pipeline_partition.h"
#include "deepshard/sharding/tensor_plan.h"

namespace deepshard::parallel {

struct ModelParallelCounts {
  StagePartition partition;
  // Parameters each tensor rank of stage s holds (every tensor rank of a stage the same count).
  std::vector<int64_t> stage_params;
  int heaviest_stage() const;
};

// `tied`: the name of the embedding weight the head is tied to ("" when untied); `layer_type`: the
// architecture's layer class (ArchEntry::layer_type), what pipeline.partition's type:REGEX matches
// besides "Embedding" and "Head". Throws
// ConfigError naming tensor_parallel.size when it does not divide a split dimension, and
// pipeline.stages when there are fewer items than stages.
ModelParallelCounts model_parallel_counts(const std::vector<models::NamedShape>& shapes,
                                          const std::string& tied, const sharding::TensorPlan& plan,
                                          const std::string& layer_type, int tensor_size,
                                          int stages, const PartitionMethod& method);

}  // namespace deepshard::parallel
