// Building only this tensor rank's part of a model's blocks (as zero.Init builds only a ZeRO-3
// rank's part): the model's constructor calls the hook with each block (sharding unit) as soon as
// it is built and initialised with the seed, and the hook replaces each split parameter of the
// block by a copy of this rank's slice (the model's tensor-parallel plan, sharding/tensor_plan.h,
// on the block's own parameter names)
// before the next block exists; then an optional next hook runs (zero::PartitionedBuild's, which
// partitions the slices over the data-parallel group). No rank ever holds more than one whole
// block beside the root (embeddings, final norm, head), which TensorParallelModel splits after.
//
//   models::TensorSliceBuild slices(plan, tensor.rank(), tensor.size());
//   auto model = models::find_arch(arch).make_model(config, seed, slices.unit_hook());
//   // then the tensor-parallel model over `model` with &slices splits the root only
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <unordered_set>

#include "deepshard/sharding/sharding_plan.h"
#include "deepshard/sharding/tensor_plan.h"

namespace deepshard::models {

class TensorSliceBuild {
 public:
  // This rank is `tensor_rank` of `tensor_size`; `plan`: the model's tensor-parallel plan (its
  // architecture's, as the model is not built yet); `next` runs on each block after its split.
  TensorSliceBuild(sharding::TensorPlan plan, int tensor_rank, int tensor_size,
                   sharding::UnitBuilt next = {});

  sharding::UnitBuilt unit_hook();

  // Whether `parameter` was split as its block was built (TensorParallelModel leaves it as is).
  bool split_at_build(const at::Tensor& parameter) const;
  // The largest block held whole at once (its parameters' bytes) and the blocks split.
  int64_t peak_whole_block_bytes() const { return peak_whole_block_bytes_; }
  int64_t blocks() const { return blocks_; }

 private:
  sharding::TensorPlan plan_;
  int rank_, size_;
  sharding::UnitBuilt next_;
  std::unordered_set<const void*> split_;  // the parameters' TensorImpls (set_data keeps them)
  int64_t peak_whole_block_bytes_ = 0, blocks_ = 0;
};

}  // namespace deepshard::models
