// Tells the engine when each parameter's gradient is final: a post-hook on every parameter's
// gradient accumulator (the mechanism c10d's Reducer uses) calls `ready(slot)` once per backward,
// after autograd has summed all uses of the parameter (and stored the sum in its .grad).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "zero/flat_params.h"
#include "zero/grad_buckets.h"

namespace torch::autograd {
struct Node;
}

namespace deepshard::zero {

using GradReady = std::function<void(size_t slot)>;

// Registers the hooks (slot i = entries[i]) and returns the accumulators; the caller must keep
// them alive as long as what `ready` uses (autograd holds accumulators weakly, and the hooks live
// on them).
std::vector<std::shared_ptr<torch::autograd::Node>> add_grad_ready_hooks(
    const std::vector<FlatParamEntry>& entries, GradReady ready);

// The common case: ready(slot) is buckets.mark_ready(slot).
std::vector<std::shared_ptr<torch::autograd::Node>> add_grad_ready_hooks(
    const std::vector<FlatParamEntry>& entries, GradBuckets& buckets);

}  // namespace deepshard::zero
