// Implementation of Stage3Unit and its states (see unit.h).
#include "zero/stage3/unit.h"

#include <torch/torch.h>

#include <sstream>

#include "deepshard/util/error.h"
#include "zero/stage3/storage_resize.h"

namespace deepshard::zero {
namespace {

std::vector<int64_t> numels_of(const std::vector<FlatParamEntry>& params) {
  std::vector<int64_t> out;
  for (const auto& p : params) out.push_back(p.param.numel());
  return out;
}

}  // namespace

const char* to_string(UnitState state) {
  switch (state) {
    case UnitState::kSharded:
      return "sharded";
    case UnitState::kGathering:
      return "gathering";
    case UnitState::kGathered:
      return "gathered";
    case UnitState::kReducing:
      return "reducing";
    case UnitState::kReleased:
      return "released";
  }
  return "?";
}

void Stage3Unit::transition(const char* operation, std::initializer_list<UnitState> from,
                            UnitState to) {
  for (UnitState s : from) {
    if (s == state_) {
      state_ = to;
      return;
    }
  }
  std::ostringstream allowed;
  for (UnitState s : from) allowed << (allowed.tellp() > 0 ? " or " : "") << to_string(s);
  throw Error(detail::concat("internal error: ZeRO-3 unit ", name_, ": ", operation, " while ",
                             to_string(state_), " (only from ", allowed.str(), ")"));
}

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
  DS_ASSERT(shard.numel() == slice_numel() && shard.dtype() == full_.dtype());
  transition("partition", {UnitState::kGathered}, UnitState::kGathered);
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

void Stage3Unit::start_gather(comm::Group& group) {
  DS_ASSERT(shard_.defined(), "ZeRO-3 unit ", name_, " gathered before partition()");
  start_gather_from(group, shard_);
}

void Stage3Unit::start_gather_from(comm::Group& group, const at::Tensor& part) {
  DS_ASSERT(part.numel() * group.size() == padded_numel(), "ZeRO-3 unit ", name_, ": a part of ",
            part.numel(), " elements gathered over ", group.size(), " ranks");
  begin_gathering();
  // Through an alias: the parameters' version counters (checked by autograd's saved views) stay.
  gather_ = group.all_gather_async(storage_alias(full_), part);
}

void Stage3Unit::start_gather_quantized(comm::Group& group) {
  DS_ASSERT(shard_.defined(), "ZeRO-3 unit ", name_, " gathered before partition()");
  begin_gathering();
  quantized_ = std::make_unique<QuantizedGather>(group, storage_alias(full_), shard_);
}

void Stage3Unit::begin_gathering() {
  const bool allocate = !holds_storage();
  transition("start_gather", {UnitState::kSharded, UnitState::kReleased, UnitState::kGathered},
             UnitState::kGathering);
  if (allocate) allocate_storage(full_, size_t(padded_numel() * element_size()));
}

at::Tensor Stage3Unit::copy_part(int index, int parts) const {
  DS_ASSERT(state_ == UnitState::kGathered && parts > 0 && padded_numel() % parts == 0 &&
                index >= 0 && index < parts,
            "ZeRO-3 unit ", name_, ": part ", index, " of ", parts, " copied while ",
            to_string(state_));
  const int64_t n = padded_numel() / parts;
  return full_.narrow(0, index * n, n).clone();
}

void Stage3Unit::wait_gather() {
  if (state_ != UnitState::kGathering) return;
  if (quantized_) {
    quantized_->wait();
    quantized_.reset();
  } else {
    gather_.wait();
    gather_ = comm::Work();
  }
  state_ = UnitState::kGathered;
}

void Stage3Unit::free_full_storage(const char* operation, UnitState to) {
  transition(operation, {UnitState::kGathered}, to);
  free_storage(full_);
}

void Stage3Unit::release() { free_full_storage("release", UnitState::kReleased); }

void Stage3Unit::reshard() { free_full_storage("reshard", UnitState::kSharded); }

void Stage3Unit::begin_grads() {
  transition("begin_grads", {UnitState::kGathered}, UnitState::kReducing);
  grads_ = torch::zeros({padded_numel()}, full_.options());
  for (auto& e : params_) {
    e.param.mutable_grad() = grads_.narrow(0, e.offset, e.numel).view(e.param.sizes());
  }
}

at::Tensor Stage3Unit::take_grads() {
  transition("take_grads", {UnitState::kReducing}, UnitState::kGathered);
  for (auto& e : params_) e.param.mutable_grad().reset();
  return std::exchange(grads_, at::Tensor());
}

std::vector<optim::ParamRange> Stage3Unit::slice_ranges(int rank, double weight_decay) const {
  std::vector<double> decay;
  for (const auto& e : params_) decay.push_back(e.decay ? weight_decay : 0.0);
  return layout_.shard_ranges(rank, decay);
}

}  // namespace deepshard::zero
