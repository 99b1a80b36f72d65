// The f / g operators and the vocabulary-parallel embedding and cross-entropy (tensor_ops.h).
// The group travels in the autograd context as its address: the group outlives the graph (it
// lives for the whole run).
#include "models/tensor_ops.h"

#include <torch/torch.h>

namespace deepshard::models {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

int64_t address_of(comm::Group& group) { return reinterpret_cast<int64_t>(&group); }
comm::Group& group_at(AutogradContext* ctx) {
  return *reinterpret_cast<comm::Group*>(ctx->saved_data["group"].toInt());
}

// A contiguous copy all-reduced (sum) over the group: the input is never changed in place.
at::Tensor summed(const at::Tensor& x, comm::Group& group) {
  at::Tensor out = x.contiguous().clone();
  group.all_reduce(out, comm::ReduceOp::kSum);
  return out;
}

struct CopyToRegion : public torch::autograd::Function<CopyToRegion> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t group) {
    ctx->saved_data["group"] = group;
    return x.view_as(x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {summed(grads[0], group_at(ctx)), at::Tensor()};
  }
};

struct ReduceFromRegion : public torch::autograd::Function<ReduceFromRegion> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t group) {
    return summed(x, *reinterpret_cast<comm::Group*>(group));
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {grads[0], at::Tensor()};
  }
};

struct VocabParallelCrossEntropy : public torch::autograd::Function<VocabParallelCrossEntropy> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& logits_in,
                            const at::Tensor& targets, int64_t vocab_start, int64_t group_address) {
    comm::Group& group = *reinterpret_cast<comm::Group*>(group_address);
    const at::Tensor logits = logits_in.to(at::kFloat);
    const int64_t local_vocab = logits.size(1);
    // Shift by the global row maximum (for exp's range; it cancels in the result).
    at::Tensor row_max = std::get<0>(logits.max(1)).contiguous();
    group.all_reduce(row_max, comm::ReduceOp::kMax);
    const at::Tensor shifted = logits - row_max.unsqueeze(1);
    // The target's logit: from the rank holding it, zero elsewhere, summed.
    const at::Tensor elsewhere = (targets < vocab_start) | (targets >= vocab_start + local_vocab);
    const at::Tensor local_target = (targets - vocab_start).masked_fill(elsewhere, 0);
    at::Tensor target_logit =
        shifted.gather(1, local_target.unsqueeze(1)).squeeze(1).masked_fill(elsewhere, 0.0);
    const at::Tensor exp = shifted.exp();
    at::Tensor sum_exp = exp.sum(1);
    // One all-reduce for both sums.
    at::Tensor both = at::stack({target_logit, sum_exp}).contiguous();
    group.all_reduce(both, comm::ReduceOp::kSum);
    target_logit = both[0];
    sum_exp = both[1];
    const at::Tensor loss = (sum_exp.log() - target_logit).mean();
    ctx->save_for_backward({exp / sum_exp.unsqueeze(1), local_target, elsewhere});
    ctx->saved_data["dtype"] = static_cast<int64_t>(logits_in.scalar_type());
    return loss;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const at::Tensor& softmax = saved[0];
    const at::Tensor& local_target = saved[1];
    const at::Tensor& elsewhere = saved[2];
    const int64_t rows = softmax.size(0);
    at::Tensor grad = softmax.clone();
    // d loss_i / d logit_j = softmax_j - [j == target_i], for the targets held here.
    grad.scatter_add_(1, local_target.unsqueeze(1),
                      (elsewhere.logical_not().to(grad.scalar_type()) * -1.0).unsqueeze(1));
    grad.mul_(grads[0] / static_cast<double>(rows));
    const auto dtype = static_cast<at::ScalarType>(ctx->saved_data["dtype"].toInt());
    return {grad.to(dtype), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor copy_to_tensor_region(const at::Tensor& x, comm::Group& tensor) {
  if (tensor.size() == 1) return x;
  return CopyToRegion::apply(x, address_of(tensor));
}

at::Tensor reduce_from_tensor_region(const at::Tensor& x, comm::Group& tensor) {
  if (tensor.size() == 1) return x;
  return ReduceFromRegion::apply(x, address_of(tensor));
}

at::Tensor vocab_parallel_embedding(const at::Tensor& idx, const at::Tensor& weight,
                                    int64_t vocab_start, comm::Group& tensor) {
  if (tensor.size() == 1) return torch::embedding(weight, idx);
  const at::Tensor elsewhere = (idx < vocab_start) | (idx >= vocab_start + weight.size(0));
  const at::Tensor local = torch::embedding(weight, (idx - vocab_start).masked_fill(elsewhere, 0));
  return reduce_from_tensor_region(local.masked_fill(elsewhere.unsqueeze(-1), 0.0), tensor);
}

at::Tensor vocab_parallel_cross_entropy(const at::Tensor& logits, const at::Tensor& targets,
                                        int64_t vocab_start, comm::Group& tensor) {
  return VocabParallelCrossEntropy::apply(logits, targets, vocab_start, address_of(tensor));
}

}  // namespace deepshard::models
