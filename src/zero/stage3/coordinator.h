// UnitCoordinator: when each ZeRO-3 unit is gathered and released (DeepSpeed's parameter
// coordinator). It owns which units stay gathered (persistent: the root, and units of at most
// stage3_param_persistence_threshold elements, in unit order while their total stays within
// stage3_model_persistence_threshold), the fetch order (UnitTrace: the first pass records it and
// the ranks compare it), the check of every gather across ranks (FetchCheck), the live budget and
// the reuse distance:
// - prefetch: once the trace is known, every fetch starts asynchronous all-gathers of the next
//   units in the trace, at most stage3_prefetch_bucket_size elements per fetch and never more than
//   stage3_max_live_parameters gathered elements (persistent units aside) beyond the unit fetched
//   now; with offload_param nvme, swapped slices are also read ahead of their gathers.
// - reuse: after a unit's forward or backward, a unit used again within stage3_max_reuse_distance
//   elements of the trace (a block's forward right before its backward) is not released, if the
//   gathered elements stay within stage3_max_live_parameters.
// Evaluation forwards (no grad) fetch on demand, outside the trace.
// - hpZ (zero_hpz_partition_size, secondary_partition.h): a unit released keeps a secondary
//   partition, and its next gathers until the parameters change read that over the hpZ group.
// - quantized weights (zero_quantized_weights, quantized_gather.h): the gathers of training and
//   evaluation passes from the slices move int8 blocks for the units that are not persistent;
//   persistent units and with_full_parameters' gathers stay exact.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "deepshard/config/ds_config.h"
#include "deepshard/zero/memory_ledger.h"
#include "zero/stage3/fetch_check.h"
#include "zero/stage3/secondary_partition.h"
#include "zero/stage3/slice_store.h"
#include "zero/stage3/unit.h"
#include "zero/stage3/unit_trace.h"

namespace deepshard::zero {

// Which units stay gathered (see above); units[0] is the root.
std::vector<bool> persistent_units(const Stage3Units& units, const config::ZeroConfig& zero);

class UnitCoordinator {
 public:
  // `names`: the plan's unit names (the trace's and the checks' messages). `secondary`: hpZ's
  // secondary partitions (null without hpZ).
  UnitCoordinator(Stage3Units& units, std::vector<bool> persistent, SliceStore& slices,
                  const config::ZeroConfig& zero, comm::Group& group, MemoryLedger& ledger,
                  const std::vector<std::string>& names, SecondaryPartitions* secondary = nullptr);

  // After SliceStore::place(u): a unit built under zero.Init (`prebuilt`, released) is gathered
  // if persistent; another (gathered, its memory counted now) is released unless persistent.
  void settle(size_t u, bool prebuilt);

  bool persistent(size_t u) const { return persistent_[u]; }
  const UnitTrace& trace() const { return trace_; }

  // Gathers u for its forward or backward in a training pass (waiting for its prefetch), records
  // it in the trace and prefetches what follows.
  void fetch(size_t u);
  // Gathers u now (an evaluation forward, a backward the engine does not drive), outside the
  // trace; waits for a gather in flight.
  void gather(size_t u);
  // After u's forward (`backward_follows`) or its backward: released unless persistent or used
  // again within stage3_max_reuse_distance (and within stage3_max_live_parameters).
  void release_unless_reused(size_t u, bool backward_follows);
  // Releases u at rest (unless persistent).
  void reshard(size_t u);
  // Every unit gathered (with_full_parameters); then every unit but the persistent at rest.
  void gather_all();
  void reshard_all();
  // The slices changed (an update, a checkpoint load): hpZ's secondary partitions are dropped and
  // the persistent (gathered) units gathered afresh from the slices.
  void after_slices_changed();
  // Ends a training pass (a collective: the trace is compared or confirmed across ranks).
  void end_pass() { trace_.end_pass(group_); }

 private:
  void prefetch(size_t current);
  bool reused_soon(size_t u) const;
  // `exact`: never quantized (zero_quantized_weights quantizes the gathers of training and
  // evaluation passes, not with_full_parameters').
  void start_gather(size_t u, bool exact = false);
  // From this rank's slice over the job's group (read from NVMe first when swapped).
  void start_primary_gather(size_t u, bool exact);
  bool from_secondary(size_t u) const { return secondary_ != nullptr && secondary_->holds(u); }
  // Waits for u's gather and its cross-rank check (fetch_check.h); a swap buffer it read from
  // goes back.
  void finish_gather(size_t u);
  // Frees u's storage (`backward_follows`: released, else resharded), if it holds any.
  void free(size_t u, bool backward_follows);
  int64_t gathered_bytes(size_t u) const;

  Stage3Units& units_;
  std::vector<bool> persistent_;
  SliceStore& slices_;
  const config::ZeroConfig& zero_;
  comm::Group& group_;
  MemoryLedger& ledger_;
  SecondaryPartitions* secondary_;
  UnitTrace trace_;
  FetchCheck fetch_check_;     // every unit gather compared across ranks (fetch_check.h)
  int64_t live_elements_ = 0;  // padded elements gathered or in flight, persistent units aside
};

}  // namespace deepshard::zero
