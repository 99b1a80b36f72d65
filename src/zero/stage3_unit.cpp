// Implementation of Stage3Unit (see stage3_unit.h).
#include "zero/stage3_unit.h"

#include <torch/torch.h>

#include "deepshard/util/error.h"
#include "zero/storage_resize.h"

namespace deepshard::zero {
namespace {

std::vector<int64_t> numels_of(const std::vector<FlatParamEntry>& params) {
  std::vector<int64_t> out;
  for (const auto& p : params) out.push_back(p.param.numel());
  return out;
}

}  // namespace

Stage3Unit::Stage3Unit(std::string name, std::vector<FlatParamEntry> params, int world_size)
    : name_(std::move(name)),
      params_(std::move(params)),
      layout_(numels_of(params_), /*bucket_numel=*/0, world_size) {
  DS_CHECK(!params_.empty(), Error, "ZeRO-3 unit ", name_, " has no trainable parameters");
  const auto options = params_.front().param.options().requires_grad(false);
  full_ = torch::zeros({layout_.padded_numel()}, options);
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    FlatParamEntry& e = params_[i];
    DS_CHECK(e.param.dtype() == options.dtype() && e.param.device() == options.device(), Error,
             "ZeRO-3 unit ", name_, ": parameter ", e.name, " is ", e.param.dtype(), "/",
             e.param.device(), ", but ", params_.front().name, " is ", options.dtype(), "/",
             options.device());
    e.offset = layout_.slot_offsets()[i];
    e.numel = e.param.numel();
    numel_ += e.numel;
    at::Tensor view = full_.narrow(0, e.offset, e.numel).view(e.param.sizes());
    view.copy_(e.param);
    e.param.set_data(view);
  }
}

void Stage3Unit::adopt(const std::string& name, const std::vector<FlatParamEntry>& params) {
  bool same = params.size() == params_.size();
  for (size_t i = 0; same && i < params.size(); ++i)
    same = params[i].param.unsafeGetTensorImpl() == params_[i].param.unsafeGetTensorImpl();
  DS_CHECK(same, Error, "ZeRO-3: unit ", name, " of the model's sharding plan does not hold the ",
           "parameters built for it under zero.Init (", name_, ": ", params_.size(),
           " parameters, the plan's: ", params.size(),
           "); the constructor must call the hook with plan unit i's module, without tied "
           "parameters");
  name_ = name;
  for (size_t i = 0; i < params.size(); ++i) params_[i].name = params[i].name;
}

void Stage3Unit::partition(comm::Group& group, const at::Tensor& shard) {
  DS_ASSERT(gathered_ && shard.numel() == slice_numel() && shard.dtype() == full_.dtype());
  group.broadcast(full_, 0);
  torch::NoGradGuard no_grad;
  shard.copy_(full_.narrow(0, group.rank() * slice_numel(), slice_numel()));
  shard_ = shard;
}

void Stage3Unit::move_shard(const at::Tensor& shard) {
  DS_ASSERT(shard_.defined() && shard.numel() == slice_numel() && shard.dtype() == full_.dtype());
  torch::NoGradGuard no_grad;
  shard.copy_(shard_);
  shard_ = shard;
}

comm::Work Stage3Unit::gather_async(comm::Group& group) {
  DS_ASSERT(shard_.defined(), "ZeRO-3 unit ", name_, " gathered before partition()");
  if (!gathered_) allocate_storage(full_, size_t(padded_numel() * element_size()));
  gathered_ = true;
  // Through an alias: the parameters' version counters (checked by autograd's saved views) stay.
  return group.all_gather_async(storage_alias(full_), shard_);
}

void Stage3Unit::release() {
  if (!gathered_) return;
  free_storage(full_);
  gathered_ = false;
}

void Stage3Unit::begin_grads() {
  DS_ASSERT(!grads_.defined(), "ZeRO-3 unit ", name_, ": gradients begun twice");
  grads_ = torch::zeros({padded_numel()}, full_.options());
  for (auto& e : params_) {
    e.param.mutable_grad() = grads_.narrow(0, e.offset, e.numel).view(e.param.sizes());
  }
}

at::Tensor Stage3Unit::take_grads() {
  DS_ASSERT(grads_.defined(), "ZeRO-3 unit ", name_, ": no gradients to take");
  for (auto& e : params_) e.param.mutable_grad().reset();
  return std::exchange(grads_, at::Tensor());
}

std::vector<optim::ParamRange> Stage3Unit::slice_ranges(int rank, double weight_decay) const {
  std::vector<double> decay;
  for (const auto& e : params_) decay.push_back(e.decay ? weight_decay : 0.0);
  return layout_.shard_ranges(rank, decay);
}

}  // namespace deepshard::zero
