// Implementation of PartitionedBuild (see partitioned_build.h).
#include "deepshard/zero/partitioned_build.h"

#include <torch/torch.h>

#include <string>

#include "zero/sharding_plan.h"
#include "zero/stage3_unit.h"
#include "zero/storage_resize.h"

namespace deepshard::zero {

PartitionedBuild::PartitionedBuild(comm::Group& group, at::ScalarType dtype)
    : group_(group), dtype_(dtype) {
  // The blocks' own storage, replaced as each block is partitioned, must go back to the OS.
  return_large_frees_to_os();
}

PartitionedBuild::~PartitionedBuild() = default;

models::GptImpl::BlockBuilt PartitionedBuild::block_hook() {
  return [this](int64_t index, models::BlockImpl& block) {
    if (dtype_ != at::kFloat) block.to(dtype_);
    const size_t u = size_t(index) + 1;
    const std::string name = "h." + std::to_string(index);
    // The unit's flat storage replaces the block's own parameter storage (freed as it goes).
    auto unit = std::make_unique<Stage3Unit>(name, unit_entries(name, block), group_.size());
    peak_full_bytes_ = std::max(peak_full_bytes_, unit->padded_numel() * unit->element_size());
    unit->partition(group_, torch::empty({unit->slice_numel()}, torch::dtype(dtype_)));
    unit->release();
    if (units_.size() <= u) units_.resize(u + 1);
    units_[u] = std::move(unit);
  };
}

std::unique_ptr<Stage3Unit> PartitionedBuild::take_unit(size_t unit) {
  if (unit >= units_.size()) return nullptr;
  return std::move(units_[unit]);
}

}  // namespace deepshard::zero
