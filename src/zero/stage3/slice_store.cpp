// Implementation of SliceStore (see slice_store.h).
#include "zero/stage3/slice_store.h"

#include <torch/torch.h>

#include <algorithm>

#include "deepshard/comm/rendezvous.h"
#include "deepshard/util/error.h"
#include "util/log.h"
#include "zero/swapped_adam.h"

namespace deepshard::zero {

SliceStore::SliceStore(Stage3Units& units, const std::vector<bool>& persistent,
                       const config::DsConfig& config, comm::Group& group, MemoryLedger& ledger)
    : units_(units), ledger_(ledger) {
  for (const auto& unit : units_) {
    slice_offsets_.push_back(shard_numel_);
    shard_numel_ += unit->slice_numel();
  }
  const auto options = units_[0]->options().requires_grad(false);
  const config::OffloadConfig& offload_param = config.zero.offload_param;
  // offload_param nvme: the slices of units that are not persistent go to NVMe, beyond the first
  // max_in_cpu elements of them (kept in host memory, DeepSpeed's max_in_cpu).
  const bool param_nvme = offload_param.device == config::OffloadDevice::kNvme;
  swapped_.assign(units_.size(), false);
  attached_.assign(units_.size(), false);
  resident_at_.assign(units_.size(), -1);
  int64_t resident_numel = 0, in_cpu = 0;
  std::vector<int64_t> swap_bytes(units_.size(), 0);
  int64_t largest_swapped = 0;
  for (size_t u = 0; u < units_.size(); ++u) {
    const int64_t slice = units_[u]->slice_numel();
    if (param_nvme && !persistent[u]) {
      if (in_cpu + slice <= offload_param.max_in_cpu) {
        in_cpu += slice;
      } else {
        swapped_[u] = true;
        swap_bytes[u] = slice * units_[u]->element_size();
        largest_swapped = std::max(largest_swapped, swap_bytes[u]);
        continue;
      }
    }
    resident_at_[u] = resident_numel;
    resident_numel += slice;
  }
  if (largest_swapped > 0) {
    offload::PartitionSwapOptions po;
    // Swap folders are named by the job's rank: a data-parallel group is one of several under
    // tensor or pipeline parallelism.
    const int job_rank = comm::job_rank(group.info());
    const offload::SwapOptions so = swap_options(config, offload_param, "params", job_rank);
    po.nvme_path = so.nvme_path;
    po.run = so.run;
    po.rank = job_rank;
    po.aio = so.aio;
    po.pin_memory = offload_param.pin_memory;
    po.buffer_count = offload_param.buffer_count;
    // A buffer larger than the largest swapped slice would never be filled; a smaller one is
    // refused (PartitionSwapper names offload_param.buffer_size).
    po.buffer_bytes =
        std::min(offload_param.buffer_size * units_[0]->element_size(), largest_swapped);
    swapper_ = std::make_unique<offload::PartitionSwapper>(swap_bytes, po);
    ledger_.allocate(MemoryCategory::kSwapBuffers, swapper_->held_bytes(), MemoryPlace::kHost);
    if (job_rank == 0) {
      log::info("offload_param nvme: ", std::count(swapped_.begin(), swapped_.end(), true), " of ",
                units_.size(), " units' slices on NVMe in ", swapper_->folder(), " (",
                offload_param.buffer_count, " buffers of ", po.buffer_bytes,
                " bytes; read ahead in the trace's order)");
    }
  }
  shard_ = torch::zeros({resident_numel}, options);
  ledger_.allocate(MemoryCategory::kParameters, resident_numel * shard_.element_size(),
                   offload_param.enabled() ? MemoryPlace::kHost : MemoryPlace::kCompute);
  if (shard_numel_ > resident_numel)
    ledger_.allocate(MemoryCategory::kParameters,
                     (shard_numel_ - resident_numel) * shard_.element_size(), MemoryPlace::kNvme);
  slice_.resize(units_.size());
}

SliceStore::~SliceStore() = default;

void SliceStore::place(size_t u, bool prebuilt, comm::Group& group) {
  Stage3Unit& unit = *units_[u];
  // A swapped unit's slice passes through a temporary on its way to its swap file.
  const at::Tensor slice = swapped_[u] ? torch::zeros({unit.slice_numel()}, shard_.options())
                                       : shard_.narrow(0, resident_at_[u], unit.slice_numel());
  if (!swapped_[u]) slice_[u] = slice;
  if (prebuilt) {  // released, its slice in a buffer of its own
    DS_CHECK(unit.options().dtype() == shard_.dtype(), Error, "ZeRO-3: unit ", unit.name(),
             " was built under zero.Init in ", unit.options().dtype(), ", the root is ",
             shard_.dtype());
    unit.move_shard(slice);
  } else {
    unit.partition(group, slice);
  }
  if (swapped_[u]) {
    swapper_->write(u, slice.data_ptr());
    unit.set_shard(at::Tensor());
  }
}

void SliceStore::drop_unused() {
  if (swapper_) swapper_->drop_unused();
}

at::Tensor SliceStore::swap_buffer(size_t u, const void* data) const {
  return at::from_blob(const_cast<void*>(data), {units_[u]->slice_numel()}, shard_.options());
}

void SliceStore::attach(size_t u) {
  DS_ASSERT(swapped_[u] && !attached_[u]);
  units_[u]->set_shard(swap_buffer(u, swapper_->acquire(u)));
  attached_[u] = true;
}

void SliceStore::detach(size_t u) {
  DS_ASSERT(attached_[u]);
  units_[u]->set_shard(at::Tensor());
  swapper_->release(u);
  attached_[u] = false;
}

void SliceStore::for_units_in(
    int64_t lo, int64_t n, const std::function<void(size_t, int64_t, int64_t, int64_t)>& fn) const {
  for (size_t u = 0; u < units_.size(); ++u) {
    const int64_t begin = slice_offsets_[u], end = begin + units_[u]->slice_numel();
    const int64_t a = std::max(lo, begin), b = std::min(lo + n, end);
    if (a < b) fn(u, a - begin, a, b - a);
  }
}

void SliceStore::publish(int64_t lo, int64_t n, const float* master) {
  torch::NoGradGuard no_grad;
  for_units_in(lo, n, [&](size_t u, int64_t in_slice, int64_t at, int64_t len) {
    const at::Tensor values =
        at::from_blob(const_cast<float*>(master) + (at - lo), {len}, at::TensorOptions(at::kFloat));
    if (!swapped_[u]) {
      slice_[u].narrow(0, in_slice, len).copy_(values);
      return;
    }
    // Windows come in shard order: a swapped unit's slice is assembled, then written whole.
    if (in_slice == 0) {
      publish_unit_ = u;
      publish_filled_ = 0;
      if (!publish_stage_.defined() || publish_stage_.numel() < units_[u]->slice_numel())
        publish_stage_ = torch::empty({units_[u]->slice_numel()}, shard_.options());
    }
    DS_ASSERT(publish_unit_ == u && publish_filled_ == in_slice, "publish out of order");
    publish_stage_.narrow(0, in_slice, len).copy_(values);
    publish_filled_ += len;
    if (publish_filled_ == units_[u]->slice_numel()) swapper_->write(u, publish_stage_.data_ptr());
  });
}

void SliceStore::read(int64_t lo, int64_t n, float* out) {
  torch::NoGradGuard no_grad;
  for_units_in(lo, n, [&](size_t u, int64_t in_slice, int64_t at, int64_t len) {
    at::Tensor dst = at::from_blob(out + (at - lo), {len}, at::TensorOptions(at::kFloat));
    if (!swapped_[u]) {
      dst.copy_(slice_[u].narrow(0, in_slice, len));
      return;
    }
    dst.copy_(swap_buffer(u, swapper_->acquire(u)).narrow(0, in_slice, len));
    swapper_->release(u);
  });
}

}  // namespace deepshard::zero
