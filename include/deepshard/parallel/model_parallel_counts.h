// The parameters one rank holds when a model is split over T tensor ranks and S pipeline stages,
// from the model's parameter list alone (models/parameter_shapes.h: no model built, no group):
// the estimator's input (`deepshard estimate --tensor T --pipeline S`). The rules are the real
// ones: tensor_split.h's split by name (a split parameter holds 1/T of its elements on each
// tensor rank), and the pipeline partition of pipeline_partition.h over the items [embedding,
// block 0 .. block n-1, head] (uniform by block count, or parameters by whole parameter counts as
// partition_model does), the embedding on the first stage, the final norm and head on the last,
// which also holds its own copy of an embedding the head is tied to (pipeline_stage.h).
// Items by name: "h.<i>." / "model.layers.<i>." are block i; wte, wpe and model.embed_tokens the
// embedding; everything else the head.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "deepshard/models/parameter_shapes.h"
#include "deepshard/parallel/pipeline_partition.h"

namespace deepshard::parallel {

struct ModelParallelCounts {
  StagePartition partition;
  // Parameters each tensor rank of stage s holds (every tensor rank of a stage the same count).
  std::vector<int64_t> stage_params;
  int heaviest_stage() const;
};

// `tied`: the name of the embedding weight the head is tied to ("" when untied). Throws
// ConfigError naming tensor_parallel.size when it does not divide a split dimension, and
// pipeline.stages when there are fewer items than stages.
ModelParallelCounts model_parallel_counts(const std::vector<models::NamedShape>& shapes,
                                          const std::string& tied, int tensor_size, int stages,
                                          const PartitionMethod& method);

}  // namespace deepshard::parallel
