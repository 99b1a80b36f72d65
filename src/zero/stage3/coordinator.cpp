// Implementation of UnitCoordinator (see coordinator.h).
#include "zero/stage3/coordinator.h"

#include "deepshard/util/error.h"

namespace deepshard::zero {

std::vector<bool> persistent_units(const Stage3Units& units, const config::ZeroConfig& zero) {
  std::vector<bool> persistent;
  int64_t persistent_numel = 0;  // of the units made persistent by the thresholds
  for (size_t u = 0; u < units.size(); ++u) {
    // The root stays gathered (nothing wraps it); small units too, in unit order while their total
    // stays within stage3_model_persistence_threshold (DeepSpeed's rule; the root is not counted).
    const int64_t numel = units[u]->numel();
    const bool small = u > 0 && numel <= zero.param_persistence_threshold &&
                       persistent_numel + numel <= zero.model_persistence_threshold;
    if (small) persistent_numel += numel;
    persistent.push_back(u == 0 || small);
  }
  return persistent;
}

UnitCoordinator::UnitCoordinator(Stage3Units& units, std::vector<bool> persistent,
                                 SliceStore& slices, const config::ZeroConfig& zero,
                                 comm::Group& group, MemoryLedger& ledger,
                                 const std::vector<std::string>& names,
                                 SecondaryPartitions* secondary)
    : units_(units),
      persistent_(std::move(persistent)),
      slices_(slices),
      zero_(zero),
      group_(group),
      ledger_(ledger),
      secondary_(secondary),
      trace_(names),
      fetch_check_(names) {}

int64_t UnitCoordinator::gathered_bytes(size_t u) const {
  return units_[u]->padded_numel() * units_[u]->element_size();
}

void UnitCoordinator::settle(size_t u, bool prebuilt) {
  if (prebuilt) {
    if (persistent_[u]) gather(u);
    return;
  }
  // A partitioned unit was gathered all along (it held the model's parameters).
  ledger_.allocate(MemoryCategory::kGatheredParams, gathered_bytes(u));
  if (persistent_[u]) return;
  live_elements_ += units_[u]->padded_numel();
  reshard(u);
}

void UnitCoordinator::fetch(size_t u) {
  const bool following = trace_.on_fetch(u);
  gather(u);
  if (following) prefetch(u);
}

void UnitCoordinator::gather(size_t u) {
  if (!units_[u]->holds_storage()) start_gather(u);
  finish_gather(u);
}

void UnitCoordinator::prefetch(size_t current) {
  int64_t bucket = zero_.prefetch_bucket_size;
  int64_t beyond_current =
      live_elements_ - (persistent_[current] ? 0 : units_[current]->padded_numel());
  for (size_t v : trace_.upcoming()) {
    if (persistent_[v] || units_[v]->holds_storage()) continue;
    const int64_t n = units_[v]->padded_numel();
    if (n > bucket || beyond_current + n > zero_.max_live_parameters) break;
    // A swapped slice needs a free swap buffer (offload_param.buffer_count bounds the prefetch),
    // unless hpZ gathers it from its secondary partition.
    if (slices_.swapped(v) && !from_secondary(v) && !slices_.read_ahead(v)) break;
    start_gather(v);
    bucket -= n;
    beyond_current += n;
  }
  if (!slices_.swaps()) return;
  // offload_param nvme: read the next swapped slices of the trace ahead of their gathers, while
  // swap buffers are free, up to twice the prefetch bucket beyond what is gathered.
  int64_t ahead = 0;
  for (size_t v : trace_.upcoming()) {
    if (!slices_.swapped(v) || units_[v]->holds_storage()) continue;
    if (ahead > 2 * zero_.prefetch_bucket_size || !slices_.read_ahead(v)) break;
    ahead += units_[v]->padded_numel();
  }
}

bool UnitCoordinator::reused_soon(size_t u) const {
  // DeepSpeed's walk: the units after the current position, until their elements reach the
  // distance; u among them is used again soon.
  int64_t walked = 0;
  for (size_t v : trace_.upcoming()) {
    if (walked >= zero_.max_reuse_distance) break;
    if (v == u) return true;
    walked += units_[v]->numel();
  }
  return false;
}

void UnitCoordinator::release_unless_reused(size_t u, bool backward_follows) {
  if (persistent_[u]) return;
  // A unit kept for its reuse counts toward stage3_max_live_parameters like a prefetched one, and
  // is kept only while the gathered elements stay within it.
  if (reused_soon(u) && live_elements_ <= zero_.max_live_parameters) return;
  free(u, backward_follows);
}

void UnitCoordinator::reshard(size_t u) {
  if (!persistent_[u]) free(u, /*backward_follows=*/false);
}

void UnitCoordinator::start_gather(size_t u, bool exact) {
  DS_ASSERT(!units_[u]->holds_storage(), "ZeRO-3 unit ", units_[u]->name(), " is ",
            to_string(units_[u]->state()), ": a fresh gather started");
  if (from_secondary(u)) {  // hpZ: inside the secondary partition's group
    fetch_check_.start(secondary_->group(), u);
    units_[u]->start_gather_from(secondary_->group(), secondary_->part(u));
  } else {
    start_primary_gather(u, exact);
  }
  ledger_.allocate(MemoryCategory::kGatheredParams, gathered_bytes(u));
  if (!persistent_[u]) live_elements_ += units_[u]->padded_numel();
}

void UnitCoordinator::start_primary_gather(size_t u, bool exact) {
  if (slices_.swapped(u)) {  // its slice from NVMe (read ahead, or now) into a swap buffer
    // No free buffer: unused read-ahead gives way, then gathers in flight are completed (their
    // buffers go back; those units stay gathered).
    if (!slices_.read_ahead(u)) slices_.drop_unused();
    for (size_t v = 0; v < units_.size() && !slices_.read_ahead(u); ++v) {
      if (slices_.attached(v)) finish_gather(v);
    }
    slices_.attach(u);
  }
  fetch_check_.start(group_, u);
  // Persistent units are gathered exactly (once per step, as DeepSpeed's persistent parameters).
  if (zero_.zero_quantized_weights && !exact && !persistent_[u]) {
    units_[u]->start_gather_quantized(group_);
  } else {
    units_[u]->start_gather(group_);
  }
}

void UnitCoordinator::finish_gather(size_t u) {
  units_[u]->wait_gather();
  fetch_check_.finish(u);
  if (slices_.attached(u)) slices_.detach(u);
}

void UnitCoordinator::free(size_t u, bool backward_follows) {
  if (!units_[u]->holds_storage()) return;
  finish_gather(u);
  if (secondary_ != nullptr) secondary_->keep(u, *units_[u]);
  if (backward_follows) {
    units_[u]->release();
  } else {
    units_[u]->reshard();
  }
  ledger_.release(MemoryCategory::kGatheredParams, gathered_bytes(u));
  if (!persistent_[u]) live_elements_ -= units_[u]->padded_numel();
}

void UnitCoordinator::gather_all() {
  for (size_t u = 0; u < units_.size(); ++u) {
    if (units_[u]->holds_storage()) continue;
    // A swapped slice holds a buffer until its gather ends: one at a time.
    if (slices_.swapped(u)) {
      start_gather(u, /*exact=*/true);
      finish_gather(u);
    } else {
      start_gather(u, /*exact=*/true);
    }
  }
  for (size_t u = 0; u < units_.size(); ++u) finish_gather(u);
}

void UnitCoordinator::reshard_all() {
  for (size_t u = 0; u < units_.size(); ++u) reshard(u);
}

void UnitCoordinator::after_slices_changed() {
  if (secondary_ != nullptr) secondary_->drop_all();
  for (size_t u = 0; u < units_.size(); ++u) {
    if (!units_[u]->holds_storage()) continue;
    finish_gather(u);  // a prefetch still in flight completes first
    fetch_check_.start(group_, u);
    units_[u]->gather(group_);
    fetch_check_.finish(u);
  }
}

}  // namespace deepshard::zero
