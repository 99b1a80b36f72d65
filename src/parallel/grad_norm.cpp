// The all-axes gradient norm of a tensor-parallel model and clipping by it (grad_norm.h).
#include "parallel/grad_norm.h"

#include <torch/torch.h>

#include <cmath>

namespace deepshard::parallel {

double global_grad_norm(models::TensorParallelModel& model) {
  comm::Group& tensor = model.tensor_group();
  double squares = 0.0;
  for (const auto& item : model.causal_lm().named_parameters()) {
    const at::Tensor& grad = item.value().grad();
    if (!grad.defined()) continue;
    if (!model.is_split(item.key()) && tensor.rank() != 0) continue;  // counted on rank 0 only
    squares += at::linalg_vector_norm(grad, 2, {}, false, at::kDouble).square().item<double>();
  }
  at::Tensor total = at::full({1}, squares, at::kDouble);
  tensor.all_reduce(total, comm::ReduceOp::kSum);
  return std::sqrt(total.item<double>());
}

void scale_to_norm(const std::vector<at::Tensor>& params, double norm, double max_norm) {
  const double coefficient = max_norm / (norm + 1e-6);
  if (coefficient >= 1.0) return;
  torch::NoGradGuard no_grad;
  for (const auto& p : params) {
    if (p.grad().defined()) p.grad().mul_(coefficient);
  }
}

double clip_grad_norm(models::TensorParallelModel& model, double max_norm) {
  const double norm = global_grad_norm(model);
  scale_to_norm(model.causal_lm().parameters(), norm, max_norm);
  return norm;
}

}  // namespace deepshard::parallel
