// Implementation of GradStaging (see grad_staging.h).
#include "zero/grad_staging.h"

#include <torch/torch.h>

#include <algorithm>

#include "deepshard/util/error.h"

namespace deepshard::zero {

GradStaging::GradStaging(const ShardLayout& layout, const std::vector<FlatParamEntry>& entries,
                         size_t count, const at::TensorOptions& options)
    : layout_(layout), entries_(entries), copied_(entries.size(), false) {
  DS_CHECK(count >= 1, Error, "GradStaging: needs at least one buffer");
  int64_t largest = 0;
  bucket_of_slot_.resize(entries.size());
  const auto& buckets = layout.buckets();
  for (size_t b = 0; b < buckets.size(); ++b) {
    largest = std::max(largest, buckets[b].numel);
    for (size_t s = buckets[b].first_slot; s < buckets[b].first_slot + buckets[b].num_slots; ++s) {
      DS_ASSERT(s < entries.size(), "GradStaging: layout slot ", s, " without a parameter");
      bucket_of_slot_[s] = b;
    }
  }
  for (size_t i = 0; i < count; ++i) buffers_.push_back(at::zeros({largest}, options));
}

int64_t GradStaging::bytes() const {
  int64_t total = 0;
  for (const auto& b : buffers_) total += b.numel() * b.element_size();
  return total;
}

at::Tensor GradStaging::region(size_t bucket) const {
  const ShardBucket& b = layout_.buckets()[bucket];
  return buffers_[bucket % buffers_.size()].narrow(0, 0, b.numel);
}

void GradStaging::copy_in(size_t slot) {
  FlatParamEntry& e = entries_[slot];
  at::Tensor& grad = e.param.mutable_grad();
  if (!grad.defined()) return;
  torch::NoGradGuard no_grad;
  const ShardBucket& b = layout_.buckets()[bucket_of_slot_[slot]];
  region(bucket_of_slot_[slot]).narrow(0, e.offset - b.offset, e.numel).copy_(grad.reshape({-1}));
  grad.reset();
  copied_[slot] = true;
}

at::Tensor GradStaging::fill(size_t bucket) {
  torch::NoGradGuard no_grad;
  const ShardBucket& b = layout_.buckets()[bucket];
  const at::Tensor out = region(bucket);
  int64_t end = 0;  // of the last parameter, in the region
  for (size_t s = b.first_slot; s < b.first_slot + b.num_slots; ++s) {
    if (!copied_[s]) copy_in(s);
    const FlatParamEntry& e = entries_[s];
    if (!copied_[s]) out.narrow(0, e.offset - b.offset, e.numel).zero_();  // no gradient
    copied_[s] = false;                                                    // for the next pass
    end = e.offset - b.offset + e.numel;
  }
  out.narrow(0, end, b.numel - end).zero_();  // padding
  return out;
}

}  // namespace deepshard::zero
