// GradStaging: stage 2's bucket-sized gradient staging buffers (DeepSpeed's IPG buffer), so that no
// buffer of the full gradient size exists. Autograd produces each parameter's gradient in the
// parameter's own .grad; it is copied (converted to the buffers' dtype, fp32) into its bucket's
// region of one of `count` buffers, each as large as the largest bucket, and the .grad is
// released. Bucket b uses buffer b % count: the engine may fill it for bucket b only once bucket
// b - count's reduction has completed, and reduces bucket b straight from it.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "zero/flat_params.h"
#include "zero/shard_layout.h"

namespace deepshard::zero {

class GradStaging {
 public:
  // `layout` must outlive this object; `entries` are the parameters in the layout's slot order.
  GradStaging(const ShardLayout& layout, const std::vector<FlatParamEntry>& entries, size_t count,
              const at::TensorOptions& options);

  size_t count() const { return buffers_.size(); }
  int64_t bytes() const;  // of all buffers
  size_t bucket_of(size_t slot) const { return bucket_of_slot_[slot]; }

  // Copies slot's gradient (if it has one) into its bucket's region now and releases the .grad.
  // Only while the bucket's buffer is free for it (see the header comment).
  void copy_in(size_t slot);
  // Completes bucket's region for its reduction: copies the gradients not copied yet, zeroes the
  // regions of parameters without a gradient and the padding; returns the region. Once per pass.
  at::Tensor fill(size_t bucket);
  // The bucket's region of its buffer (its numel elements).
  at::Tensor region(size_t bucket) const;

 private:
  const ShardLayout& layout_;
  std::vector<FlatParamEntry> entries_;
  std::vector<at::Tensor> buffers_;
  std::vector<size_t> bucket_of_slot_;
  std::vector<bool> copied_;  // in this pass
};

}  // namespace deepshard::zero
