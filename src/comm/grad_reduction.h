// Averaging gradients over the data-parallel group the way DeepSpeed does, with its knobs
// (DeepSpeed's `gradient_reduction_w_predivide` and ZeRO's reduce-scatter):
//  - wire dtype (`communication_data_type`): the gradient is cast to it, reduced in it, and cast
//    back; 16-bit wires halve the bytes (bf16 sums happen in fp32 on this Gloo build, fp16 all-
//    reduces sum in fp16 along Gloo's ring, fp16 reduce-scatters in fp32);
//  - `gradient_predivide_factor` f: multiply by 1/f before the sum, by f/N after it (all-reduce
//    only; DeepSpeed asserts f == 1 with reduce-scatter);
//  - `prescale_gradients`: divide by N before the sum instead of after (all-reduce only).
// With none of them (wire = the gradient's dtype, f = 1, no prescale) it is exactly the group's
// kAvg collective. Otherwise the post-scaling and the cast back run in complete_next(), which the
// caller invokes once per started reduction, in the order they were started, after waiting for
// the reduction's Work (a no-op for plain reductions).
#pragma once

#include <ATen/core/Tensor.h>

#include <deque>
#include <functional>
#include <optional>

#include "deepshard/comm/group.h"

namespace deepshard::comm {

struct GradReductionOptions {
  std::optional<at::ScalarType> wire_dtype;  // nullopt: the gradient's own dtype
  double predivide_factor = 1.0;
  bool prescale = false;
};

class GradReduction {
 public:
  // Throws Error when predivide_factor is not positive.
  GradReduction(Group& group, GradReductionOptions options);

  // In place: grads = the mean over ranks (once complete_next() ran for it).
  Work all_reduce_mean_async(const at::Tensor& grads);
  // out = the mean over ranks of slice rank() of `in` (once complete_next() ran for it). Throws
  // Error if predivide/prescale are set.
  Work reduce_scatter_mean_async(const at::Tensor& out, const at::Tensor& in);
  // Finishes the oldest started reduction (its Work must have been waited for).
  void complete_next();

  const GradReductionOptions& options() const { return options_; }
  bool plain() const;  // none of the knobs differs from the plain kAvg collective (for any dtype)

 private:
  Group& group_;
  GradReductionOptions options_;
  std::deque<std::function<void()>> pending_;  // one per started reduction, oldest first
};

}  // namespace deepshard::comm
