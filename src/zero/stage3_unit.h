// Stage3Unit: one ZeRO-3 sharding unit (a transformer block, or the root: everything outside the
// blocks). Its parameters live in one flat storage laid out as N equal rank slices (padded at the
// end, ShardLayout with one bucket), and every parameter's data is a view of it. Rank r keeps
// slice r in a shard buffer the engine owns; gather() all-gathers the slices straight into the
// flat storage (allocating it if it was freed), release() frees that storage in place, so the
// parameters and autograd's saved views of them hold no memory until the next gather (design §2).
// During a unit's backward its parameters' .grad are views of one flat gradient buffer of the
// same layout, which the engine reduce-scatters and then drops.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "deepshard/comm/group.h"
#include "deepshard/optim/adam.h"
#include "zero/flat_params.h"
#include "zero/shard_layout.h"

namespace deepshard::zero {

class Stage3Unit {
 public:
  // Moves `params` (name, param, decay; offsets are assigned here) into the unit's flat storage.
  // All parameters must share dtype and device. The unit starts gathered.
  Stage3Unit(std::string name, std::vector<FlatParamEntry> params, int world_size);

  // Makes every rank's parameters rank 0's (broadcast), copies this rank's slice into `shard`
  // (slice_numel() elements, the unit's dtype) and keeps it as the source of every gather.
  void partition(comm::Group& group, const at::Tensor& shard);

  // Moves this rank's slice into `shard` (a view of the engine's shard buffer; same size and
  // dtype) and gathers from there from now on (a unit partitioned before the engine existed).
  void move_shard(const at::Tensor& shard);

  // The slice the next gathers read from, taken as it is (no copy): a swapped slice read into a
  // buffer (offload_param nvme); undefined until the next set_shard().
  void set_shard(const at::Tensor& shard) { shard_ = shard; }

  // All-gathers the slices into the flat storage (allocating it first if it is released). On a
  // gathered unit it refreshes the parameters from the shards (after an update).
  void gather(comm::Group& group) { gather_async(group).wait(); }
  // The same, started asynchronously: the parameters are valid once the handle is waited for.
  comm::Work gather_async(comm::Group& group);
  // Frees the flat storage. The parameters keep their shapes but no memory.
  void release();
  bool gathered() const { return gathered_; }

  // Gives every parameter a zero gradient that is a view of one flat buffer (padded_numel()).
  void begin_grads();
  bool grads_begun() const { return grads_.defined(); }
  // The flat gradient buffer; the parameters' .grad are reset (the buffer is freed when the
  // caller drops it).
  at::Tensor take_grads();

  const std::string& name() const { return name_; }
  const std::vector<FlatParamEntry>& params() const { return params_; }
  int64_t numel() const { return numel_; }  // parameters only
  int64_t padded_numel() const { return layout_.padded_numel(); }
  int64_t slice_numel() const { return layout_.shard_numel(); }
  int64_t element_size() const { return full_.element_size(); }
  // Optimizer ranges over this unit's slice of rank `rank` (offsets relative to the slice).
  std::vector<optim::ParamRange> slice_ranges(int rank, double weight_decay) const;
  // The pieces of the parameters in rank `rank`'s slice (shard_offset relative to the slice; slot
  // indexes params()). Checkpoints map them to per-parameter element ranges.
  std::vector<OwnedPiece> slice_pieces(int rank) const { return layout_.owned_pieces(rank); }

 private:
  std::string name_;
  std::vector<FlatParamEntry> params_;
  ShardLayout layout_;
  int64_t numel_ = 0;
  at::Tensor full_;   // [padded_numel]: the storage every parameter views
  at::Tensor shard_;  // [slice_numel]: this rank's slice (a view of the engine's shard buffer)
  at::Tensor grads_;  // [padded_numel] during the unit's backward, else undefined
  bool gathered_ = true;
};

}  // namespace deepshard::zero
