// TensorSliceBuild: each block split over the tensor ranks as it is built (tensor_slice_build.h).
#include "models/tensor_slice_build.h"

#include <torch/torch.h>

#include <algorithm>

#include "deepshard/util/error.h"
#include "models/tensor_slices.h"

namespace deepshard::models {

TensorSliceBuild::TensorSliceBuild(sharding::TensorPlan plan, int tensor_rank, int tensor_size,
                                   sharding::UnitBuilt next)
    : plan_(std::move(plan)), rank_(tensor_rank), size_(tensor_size), next_(std::move(next)) {}

sharding::UnitBuilt TensorSliceBuild::unit_hook() {
  return [this](size_t unit, torch::nn::Module& block) {
    torch::NoGradGuard no_grad;
    int64_t whole_bytes = 0;
    // A block's own names end like the model's, which is all the plan's rules read.
    for (auto& item : block.named_parameters()) {
      at::Tensor& p = item.value();
      whole_bytes += p.numel() * static_cast<int64_t>(p.element_size());
      const TensorSplit split = plan_.split(item.key());
      if (split == TensorSplit::kReplicated) continue;
      const int64_t dim = plan_.split_dim(item.key());
      const int64_t parts = split == TensorSplit::kQkvRows ? 3 * size_ : size_;
      DS_CHECK(p.size(dim) % parts == 0, Error, "tensor_parallel.size ", size_, ": block ", unit,
               "'s ", item.key(), " ", p.sizes(), " does not split into ", size_, " equal parts");
      p.set_data(tensor_slice(p, split, rank_, size_).clone());
      split_.insert(p.unsafeGetTensorImpl());
    }
    peak_whole_block_bytes_ = std::max(peak_whole_block_bytes_, whole_bytes);
    ++blocks_;
    if (next_) next_(unit, block);
  };
}

bool TensorSliceBuild::split_at_build(const at::Tensor& parameter) const {
  return split_.count(parameter.unsafeGetTensorImpl()) > 0;
}

}  // namespace deepshard::models
