// Implementation of PartitionedBuild (see partitioned_build.h).
#include "deepshard/zero/partitioned_build.h"

#include <torch/torch.h>

#include <string>

#include "zero/stage3/storage_resize.h"
#include "zero/stage3/unit.h"
#include "zero/stage3/unit_plan.h"

namespace deepshard::zero {

PartitionedBuild::PartitionedBuild(comm::Group& group, at::ScalarType dtype)
    : group_(group), dtype_(dtype) {
  // The units' own storage, replaced as each unit is partitioned, must go back to the OS.
  return_large_frees_to_os();
}

PartitionedBuild::~PartitionedBuild() = default;

sharding::UnitBuilt PartitionedBuild::unit_hook() {
  return [this](size_t index, torch::nn::Module& module) {
    module.to(dtype_);
    const size_t u = index + 1;
    // Named after the plan's unit when the engine adopts it.
    const std::string name = "unit " + std::to_string(index);
    // The unit's flat storage replaces the module's own parameter storage (freed as it goes).
    auto unit = std::make_unique<Stage3Unit>(name, trainable_entries(name, module), group_.size());
    peak_full_bytes_ = std::max(peak_full_bytes_, unit->padded_numel() * unit->element_size());
    unit->partition(group_, torch::empty({unit->slice_numel()}, unit->options()));
    unit->reshard();
    if (units_.size() <= u) units_.resize(u + 1);
    units_[u] = std::move(unit);
  };
}

std::unique_ptr<Stage3Unit> PartitionedBuild::take_unit(size_t unit) {
  if (unit >= units_.size()) return nullptr;
  return std::move(units_[unit]);
}

}  // namespace deepshard::zero
