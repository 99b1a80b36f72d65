// Implementation of run_before_backward (see pre_backward.h): a torch::autograd::Function whose
// backward calls the callback and passes the gradient through.
#include "zero/stage3/pre_backward.h"

#include <torch/torch.h>

#include <cstdint>

namespace deepshard::zero {
namespace {

struct PreBackward : public torch::autograd::Function<PreBackward> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            int64_t callback) {
    // Saved data holds IValues: the callback travels as its address.
    ctx->saved_data["callback"] = callback;
    return x.view_as(x);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto* callback = reinterpret_cast<const std::function<void()>*>(
        static_cast<intptr_t>(ctx->saved_data["callback"].toInt()));
    (*callback)();
    return {grads[0], at::Tensor()};
  }
};

}  // namespace

at::Tensor run_before_backward(const at::Tensor& output, const std::function<void()>* callback) {
  if (!torch::GradMode::is_enabled() || !output.requires_grad()) return output;
  return PreBackward::apply(output, static_cast<int64_t>(reinterpret_cast<intptr_t>(callback)));
}

}  // namespace deepshard::zero
