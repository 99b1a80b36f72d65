// DeepSpeed's zero.Init for deepshard's GPT: the model is built block by block and each block is
// partitioned as soon as it exists (its parameters moved into a ZeRO-3 unit's flat storage,
// rank 0's values broadcast, this rank's slice kept, the storage freed), so no rank ever holds
// more than one full block beside the root (embeddings, ln_f: the root unit stays gathered
// anyway). The stage-3 engine then adopts the units instead of partitioning a full model:
//
//   zero::PartitionedBuild build(group, at::kFloat);
//   models::Gpt model(config, seed, build.block_hook());
//   auto engine = zero::Engine::initialize(model.ptr(), ds_config, group, &build);
//
// The weights are the ones the same seed gives without it (the initialisation draws the same
// values part by part).
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "deepshard/comm/group.h"
#include "deepshard/models/gpt.h"

namespace deepshard::zero {

class Stage3Unit;

class PartitionedBuild {
 public:
  // `dtype`: the parameters' dtype in training (each block is converted before it is partitioned).
  PartitionedBuild(comm::Group& group, at::ScalarType dtype);
  ~PartitionedBuild();
  PartitionedBuild(const PartitionedBuild&) = delete;
  PartitionedBuild& operator=(const PartitionedBuild&) = delete;

  // For GptImpl's constructor: partitions block i into unit i + 1 (the GPT sharding plan's).
  models::GptImpl::BlockBuilt block_hook();
  // The largest number of bytes held in full (gathered) unit storage at once during the build.
  int64_t peak_full_bytes() const { return peak_full_bytes_; }

  // For the stage-3 engine: the unit built for plan unit `unit` (null if none), taken over.
  std::unique_ptr<Stage3Unit> take_unit(size_t unit);

 private:
  comm::Group& group_;
  at::ScalarType dtype_;
  std::vector<std::unique_ptr<Stage3Unit>> units_;  // by plan unit index (0, the root: none)
  int64_t peak_full_bytes_ = 0;
};

}  // namespace deepshard::zero
