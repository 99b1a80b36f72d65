// The shared part of the tensor-parallel models (tensor_parallel_model.h): the loss from the
// parts, the in-place split of the whole model into this rank's slices and the gather of the
// whole parameters.
#include "models/tensor_parallel_model.h"

#include <torch/torch.h>

#include "deepshard/util/error.h"
#include "models/tensor_slice_build.h"
#include "models/tensor_slices.h"

namespace deepshard::models {

void require_divisible(const comm::Group& tensor, const char* key, int64_t value, const char* why) {
  DS_CHECK(value % tensor.size() == 0, Error, "tensor_parallel.size ", tensor.size(), ": model.",
           key, " ", value, " is not divisible by it (", why, ")");
}

TensorParallelModel::TensorParallelModel(comm::Group& tensor, int64_t vocab_size,
                                         sharding::TensorPlan plan, const TensorSliceBuild* built)
    : tensor_(tensor), plan_(std::move(plan)), built_(built) {
  require_divisible(tensor, "vocab_size", vocab_size,
                    "the vocabulary is split over the tensor ranks");
  vocab_start_ = vocab_size / tensor.size() * tensor.rank();
}

bool TensorParallelModel::is_split(const std::string& name) const {
  return plan_.split(name) != TensorSplit::kReplicated;
}

int TensorParallelModel::split_dim(const std::string& name) const { return plan_.split_dim(name); }

at::Tensor TensorParallelModel::loss(const at::Tensor& idx, const at::Tensor& targets) {
  check_batch(idx, targets);
  models::CausalLmImpl& model = causal_lm();
  at::Tensor x = embed(idx);
  for (int64_t i = 0; i < model.num_layers(); ++i) x = model.run_layer(i, x);
  return head_loss(x, targets);
}

void TensorParallelModel::check_batch(const at::Tensor& idx, const at::Tensor& targets) {
  models::CausalLmImpl& model = causal_lm();
  DS_CHECK(idx.dim() == 2 && idx.scalar_type() == at::kLong && targets.sizes() == idx.sizes(),
           Error, "tensor-parallel ", model.arch(),
           " loss: idx and targets must be [B, T] int64, got ", idx.sizes(), " and ",
           targets.sizes());
  DS_CHECK(idx.size(1) <= model.context_length(), Error, "tensor-parallel ", model.arch(),
           " loss: sequence length ", idx.size(1), " exceeds block_size ", model.context_length());
}

void TensorParallelModel::keep_slices() {
  const int n = tensor_.size(), t = tensor_.rank();
  torch::NoGradGuard no_grad;
  for (auto& item : causal_lm().named_parameters()) {
    const TensorSplit split = plan_.split(item.key());
    if (split == TensorSplit::kReplicated) continue;
    if (built_ != nullptr && built_->split_at_build(item.value())) continue;
    item.value().set_data(tensor_slice(item.value(), split, t, n).clone());
  }
}

std::vector<std::pair<std::string, at::Tensor>> TensorParallelModel::gather_full_parameters() {
  torch::NoGradGuard no_grad;
  std::vector<std::pair<std::string, at::Tensor>> out;
  const int n = tensor_.size();
  for (auto& item : causal_lm().named_parameters()) {
    const TensorSplit split = plan_.split(item.key());
    at::Tensor local = item.value().detach().contiguous();
    // A parameter without elements is another pipeline stage's, released on this rank.
    if (split == TensorSplit::kReplicated || n == 1 || local.numel() == 0) {
      out.emplace_back(item.key(), local.clone());
      continue;
    }
    at::Tensor all = at::empty({local.numel() * n}, local.options());
    tensor_.all_gather(all, local.view({-1}));
    std::vector<at::Tensor> slices;
    for (const at::Tensor& s : all.chunk(n, 0)) slices.push_back(s.view(local.sizes()));
    out.emplace_back(item.key(), join_tensor_slices(slices, split));
  }
  return out;
}

}  // namespace deepshard::models
