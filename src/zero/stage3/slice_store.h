// SliceStore: where this rank's slice of each ZeRO-3 unit lives, and the parameter swapper of
// offload_param nvme. Resident slices are views of one shard buffer (in the parameters' dtype; in
// host memory with offload_param); with offload_param nvme, the slices of units that are not
// persistent go to NVMe beyond the first max_in_cpu elements of them (DeepSpeed's max_in_cpu),
// each read into a swap buffer before its gather (ahead of time in the trace's order) and given
// back when the gather is done. Slice offsets index the concatenation of every unit's slice (the
// optimizer's shard), swapped or not.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "deepshard/config/ds_config.h"
#include "deepshard/zero/memory_ledger.h"
#include "offload/partition_swapper.h"
#include "zero/stage3/unit.h"

namespace deepshard::zero {

class SliceStore {
 public:
  // Places every unit's slice (not yet filled: place() does) and accounts for the shard buffer
  // and the swap buffers in `ledger`. `persistent[u]`: unit u stays gathered (never swapped).
  SliceStore(Stage3Units& units, const std::vector<bool>& persistent,
             const config::DsConfig& config, comm::Group& group, MemoryLedger& ledger);
  ~SliceStore();

  // Fills unit u's slice: a unit built under zero.Init (`prebuilt`) moves its slice there,
  // another is partitioned from its full parameters (a collective); a swapped slice is written
  // to its swap file and detached from the unit.
  void place(size_t u, bool prebuilt, comm::Group& group);

  int64_t shard_numel() const { return shard_numel_; }
  int64_t slice_offset(size_t u) const { return slice_offsets_[u]; }
  const at::Tensor& shard() const { return shard_; }  // the resident slices
  bool swaps() const { return swapper_ != nullptr; }
  bool swapped(size_t u) const { return swapped_[u]; }

  // The swapper (swaps() only): starts reading u's slice ahead into a free buffer; false when no
  // buffer is free.
  bool read_ahead(size_t u) { return swapper_->prefetch(u); }
  // Frees every buffer no gather holds (their data is stale after an update). Nothing without
  // swapping.
  void drop_unused();
  // Gives unit u its swapped slice (read ahead, or read now) as the source of its next gather;
  // the buffer is held until detach().
  void attach(size_t u);
  bool attached(size_t u) const { return attached_[u]; }
  // After u's gather: its buffer goes back.
  void detach(size_t u);

  // The updated fp32 master of shard elements [lo, lo + n) into the slices (cast): in RAM, or
  // (swapped) staged per unit and written when the unit's slice is complete; windows come in
  // shard order.
  void publish(int64_t lo, int64_t n, const float* master);
  // The parameters of shard elements [lo, lo + n) as fp32 into `out` (reading swapped slices).
  void read(int64_t lo, int64_t n, float* out);

 private:
  // fn(unit, first element in the unit's slice, shard offset, length) for the units in [lo, lo+n).
  void for_units_in(int64_t lo, int64_t n,
                    const std::function<void(size_t, int64_t, int64_t, int64_t)>& fn) const;
  // u's swapped slice in its acquired buffer.
  at::Tensor swap_buffer(size_t u, const void* data) const;

  Stage3Units& units_;
  MemoryLedger& ledger_;
  std::vector<int64_t> slice_offsets_;  // of each unit's slice in the optimizer's shard
  int64_t shard_numel_ = 0;
  at::Tensor shard_;                  // the resident slices, in the parameters' dtype
  std::vector<int64_t> resident_at_;  // of each resident slice in shard_ (-1: swapped)
  std::vector<at::Tensor> slice_;     // per unit: its slice in RAM (undefined when swapped)
  std::vector<bool> swapped_;
  std::vector<bool> attached_;  // a swap buffer is the source of the unit's gather in flight
  std::unique_ptr<offload::PartitionSwapper> swapper_;
  at::Tensor publish_stage_;  // one swapped unit's updated slice being assembled
  size_t publish_unit_ = 0;
  int64_t publish_filled_ = 0;
};

}  // namespace deepshard::zero
