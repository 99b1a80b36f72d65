// Implementation of FlatParams (see flat_params.h).
#include "zero/flat_params.h"

#include <torch/torch.h>

#include <unordered_set>

#include "deepshard/util/error.h"

namespace deepshard::zero {

FlatParams::FlatParams(torch::nn::Module& module, int64_t alignment)
    : FlatParams(module, [alignment](const std::vector<int64_t>& numels) {
        DS_ASSERT(alignment >= 1);
        Placement p;
        for (int64_t n : numels) {
          p.offsets.push_back(p.size);
          p.size += n;
        }
        p.size = (p.size + alignment - 1) / alignment * alignment;
        return p;
      }) {}

FlatParams::FlatParams(torch::nn::Module& module, const Placer& place, bool grad_buffer) {
  std::unordered_set<const void*> seen;
  std::vector<FlatParamEntry> in_order;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    const at::Tensor& p = item.value();
    if (!p.requires_grad() || !seen.insert(p.unsafeGetTensorImpl()).second) continue;
    FlatParamEntry e;
    e.name = item.key();
    e.param = p;
    e.numel = p.numel();
    e.decay = p.dim() >= 2;
    in_order.push_back(std::move(e));
  }
  DS_CHECK(!in_order.empty(), Error, "the model has no trainable parameters");
  const auto options = in_order.front().param.options();
  for (const auto& e : in_order) {
    DS_CHECK(e.param.dtype() == options.dtype() && e.param.device() == options.device(), Error,
             "parameter ", e.name, " has dtype/device ", e.param.dtype(), "/", e.param.device(),
             " but ", in_order.front().name, " has ", options.dtype(), "/", options.device(),
             ": all parameters of a flat group must share them");
  }

  // Reverse registration order (see the header).
  entries_.assign(in_order.rbegin(), in_order.rend());
  std::vector<int64_t> numels;
  for (const auto& e : entries_) numels.push_back(e.numel);
  const Placement placement = place(numels);
  DS_ASSERT(placement.offsets.size() == entries_.size());
  int64_t end = 0;
  for (size_t i = 0; i < entries_.size(); ++i) {
    DS_ASSERT(placement.offsets[i] >= end, "parameter placements overlap");
    entries_[i].offset = placement.offsets[i];
    end = entries_[i].offset + entries_[i].numel;
    numel_ += entries_[i].numel;
  }
  DS_ASSERT(placement.size >= end, "parameter placement beyond the buffer");
  const int64_t padded = placement.size;
  params_ = torch::zeros({padded}, options.requires_grad(false));
  if (grad_buffer) grads_ = torch::zeros({padded}, options.requires_grad(false));

  torch::NoGradGuard no_grad;
  for (auto& e : entries_) {
    auto param_view = params_.narrow(0, e.offset, e.numel).view(e.param.sizes());
    param_view.copy_(e.param);
    e.param.set_data(param_view);
    if (grad_buffer) {
      e.param.mutable_grad() = grads_.narrow(0, e.offset, e.numel).view(e.param.sizes());
    } else {
      e.param.mutable_grad().reset();
    }
  }
}

std::vector<optim::ParamRange> FlatParams::ranges(double weight_decay) const {
  std::vector<optim::ParamRange> out;
  out.reserve(entries_.size());
  for (const auto& e : entries_) out.push_back({e.offset, e.numel, e.decay ? weight_decay : 0.0});
  return out;
}

void FlatParams::accumulate_grads_into(const at::Tensor& accumulator) {
  DS_ASSERT(grads_.defined(), "accumulate_grads_into: no gradient buffer");
  DS_ASSERT(accumulator.numel() == grads_.numel(), "accumulator size ", accumulator.numel(),
            " != gradient buffer size ", grads_.numel());
  torch::NoGradGuard no_grad;
  accumulator.add_(grads_);
  grads_.zero_();
}

at::Tensor FlatParams::view_of(const at::Tensor& buffer, const std::string& name) const {
  DS_ASSERT(buffer.numel() == padded_numel(), "view_of: a buffer of ", buffer.numel(),
            " elements for flat buffers of ", padded_numel());
  for (const FlatParamEntry& e : entries_) {
    if (e.name == name) return buffer.narrow(0, e.offset, e.numel).view(e.param.sizes());
  }
  throw Error("no trainable parameter named " + name + " in this engine");
}

}  // namespace deepshard::zero
