// Implementation of add_grad_ready_hooks (see grad_ready_hooks.h).
#include "zero/grad_ready_hooks.h"

#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/torch.h>

#include "deepshard/util/error.h"

namespace deepshard::zero {

std::vector<std::shared_ptr<torch::autograd::Node>> add_grad_ready_hooks(
    const std::vector<FlatParamEntry>& entries, GradReady ready) {
  auto shared = std::make_shared<GradReady>(std::move(ready));
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;
  for (size_t i = 0; i < entries.size(); ++i) {
    auto accumulator = torch::autograd::impl::grad_accumulator(entries[i].param);
    DS_ASSERT(accumulator != nullptr, "no grad accumulator for ", entries[i].name);
    accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [shared, i](const torch::autograd::variable_list& outputs,
                    const torch::autograd::variable_list&) {
          (*shared)(i);
          return outputs;
        }));
    accumulators.push_back(std::move(accumulator));
  }
  return accumulators;
}

std::vector<std::shared_ptr<torch::autograd::Node>> add_grad_ready_hooks(
    const std::vector<FlatParamEntry>& entries, GradBuckets& buckets) {
  GradBuckets* b = &buckets;
  return add_grad_ready_hooks(entries, [b](size_t slot) { b->mark_ready(slot); });
}

}  // namespace deepshard::zero
