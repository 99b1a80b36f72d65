// DeepSpeed's zero.Init for any model that declares sharding units (deepshard/sharding): the model
// calls the hook with each unit as soon as the unit is built, and the unit is partitioned at once
// (its trainable parameters moved into a ZeRO-3 unit's flat storage, rank 0's values broadcast,
// this rank's slice kept, the storage freed), so no rank ever holds more than one full unit beside
// the root (what no unit holds stays gathered anyway). The stage-3 engine then adopts the units
// instead of partitioning a full model:
//
//   zero::PartitionedBuild build(group, at::kFloat);
//   MyModel model(options, build.unit_hook());        // calls hook(i, unit_i) as it builds
//   auto engine = zero::Engine::initialize(model.ptr(), ds_config, group, &build);
//
// Unit i of the hook is unit i of the model's sharding plan; a unit built this way must not hold a
// tied parameter (the root holds those). Frozen parameters and buffers stay whole.
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "deepshard/comm/group.h"
#include "deepshard/sharding/sharding_plan.h"

namespace deepshard::zero {

class Stage3Unit;

class PartitionedBuild {
 public:
  // `dtype`: the parameters' dtype in training (each unit is converted before it is partitioned).
  PartitionedBuild(comm::Group& group, at::ScalarType dtype);
  ~PartitionedBuild();
  PartitionedBuild(const PartitionedBuild&) = delete;
  PartitionedBuild& operator=(const PartitionedBuild&) = delete;

  // For the model's constructor: partitions the module of plan unit i.
  sharding::UnitBuilt unit_hook();
  sharding::UnitBuilt block_hook() { return unit_hook(); }  // the name block builders use
  // The largest number of bytes held in full (gathered) unit storage at once during the build.
  int64_t peak_full_bytes() const { return peak_full_bytes_; }
  at::ScalarType dtype() const { return dtype_; }

  // For the stage-3 engine: the unit built for plan unit `unit` (its engine index: 1 + the plan's),
  // null if none, taken over.
  std::unique_ptr<Stage3Unit> take_unit(size_t unit);

 private:
  comm::Group& group_;
  at::ScalarType dtype_;
  std::vector<std::unique_ptr<Stage3Unit>> units_;  // by engine unit index (0, the root: none)
  int64_t peak_full_bytes_ = 0;
};

}  // namespace deepshard::zero
