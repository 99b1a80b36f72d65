// Stage3Unit: one ZeRO-3 sharding unit (a transformer block, or the root: everything outside the
// blocks) and the state it is in. Its parameters live in one flat storage laid out as N equal rank
// slices (padded at the end, ShardLayout with one bucket), and every parameter's data is a view of
// it. Rank r keeps slice r in a shard buffer the engine owns; a gather all-gathers the slices
// straight into the flat storage (allocating it if it was freed), a release frees that storage in
// place, so the parameters and autograd's saved views of them hold no memory until the next gather
// (design §2). During a unit's backward its parameters' .grad are views of one flat gradient
// buffer of the same layout, which the gradient reducer takes and reduce-scatters.
//
// The unit is a state machine (UnitState); every operation names the states it may start from,
// and any other order is an internal error naming the unit, the operation and the state:
//
//   kGathered  --start_gather-->  kGathering  --wait_gather-->  kGathered      (refresh)
//   kSharded / kReleased  --start_gather-->  kGathering
//   kGathered  --begin_grads-->  kReducing  --take_grads-->  kGathered
//   kGathered  --release-->  kReleased  (after its forward: its backward gathers it again)
//   kGathered  --reshard-->  kSharded   (at rest: only this rank's slice)
//
// A new unit is kGathered (it holds the model's parameters).
#pragma once

#include <ATen/core/Tensor.h>

#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "deepshard/comm/group.h"
#include "optim/adam.h"
#include "zero/flat_params.h"
#include "zero/shard_layout.h"
#include "zero/stage3/quantized_gather.h"

namespace deepshard::zero {

enum class UnitState {
  kSharded,    // only this rank's slice; the flat storage is freed
  kGathering,  // an all-gather into the flat storage is in flight
  kGathered,   // the flat storage holds every rank's slice: the parameters are valid
  kReducing,   // gathered, in its backward: gradients accumulate in the flat gradient buffer
  kReleased,   // freed after its forward; its backward gathers it again
};
const char* to_string(UnitState state);

class Stage3Unit {
 public:
  // Moves `params` (name, param, decay; offsets are assigned here) into the unit's flat storage.
  // All parameters must share dtype and device. The unit starts gathered.
  Stage3Unit(std::string name, std::vector<FlatParamEntry> params, int world_size);

  // Makes every rank's parameters rank 0's (broadcast), copies this rank's slice into `shard`
  // (slice_numel() elements, the unit's dtype) and keeps it as the source of every gather.
  // From kGathered.
  void partition(comm::Group& group, const at::Tensor& shard);

  // Moves this rank's slice into `shard` (a view of the engine's shard buffer; same size and
  // dtype) and gathers from there from now on (a unit partitioned before the engine existed).
  void move_shard(const at::Tensor& shard);

  // The slice the next gathers read from, taken as it is (no copy): a swapped slice read into a
  // buffer (offload_param nvme); undefined until the next set_shard().
  void set_shard(const at::Tensor& shard) { shard_ = shard; }

  // Starts all-gathering the slices into the flat storage (allocating it first if it is freed):
  // kSharded, kReleased or kGathered (a refresh after an update) to kGathering.
  void start_gather(comm::Group& group);
  // The same from another partition of the flat storage: `part` is this rank's part of the
  // padded storage cut into group.size() equal parts (a secondary partition,
  // secondary_partition.h).
  void start_gather_from(comm::Group& group, const at::Tensor& part);
  // The same as start_gather, with the slices quantized to int8 on the wire (ZeRO++'s quantized
  // weights, quantized_gather.h): the parameters are the dequantized slices until the next gather.
  void start_gather_quantized(comm::Group& group);
  // Waits for the gather in flight (kGathering to kGathered); nothing in another state.
  void wait_gather();
  // Both: the parameters are valid on return.
  void gather(comm::Group& group) {
    start_gather(group);
    wait_gather();
  }
  // A copy of part `index` of the padded storage cut into `parts` equal parts (`parts` divides
  // the world size), from kGathered.
  at::Tensor copy_part(int index, int parts) const;
  // Frees the flat storage (the parameters keep their shapes but no memory), from kGathered:
  // release() until its backward (kReleased), reshard() at rest (kSharded).
  void release();
  void reshard();

  UnitState state() const { return state_; }
  // The flat storage is allocated: gathering, gathered or reducing.
  bool holds_storage() const {
    return state_ != UnitState::kSharded && state_ != UnitState::kReleased;
  }

  // Gives every parameter a zero gradient that is a view of one flat buffer (padded_numel()):
  // kGathered to kReducing.
  void begin_grads();
  bool grads_begun() const { return state_ == UnitState::kReducing; }
  // The flat gradient buffer; the parameters' .grad are reset (the buffer is freed when the
  // caller drops it): kReducing to kGathered.
  at::Tensor take_grads();

  // A unit partitioned under zero.Init, taken over by the engine: checks that `params` (the plan's,
  // named as the model names them) are exactly this unit's parameters, in order, and takes their
  // names and `name`. Throws Error naming the unit otherwise.
  void adopt(const std::string& name, const std::vector<FlatParamEntry>& params);

  const std::string& name() const { return name_; }
  const std::vector<FlatParamEntry>& params() const { return params_; }
  int64_t numel() const { return numel_; }  // parameters only
  int64_t padded_numel() const { return layout_.padded_numel(); }
  int64_t slice_numel() const { return layout_.shard_numel(); }
  int64_t element_size() const { return full_.element_size(); }
  at::TensorOptions options() const { return full_.options(); }
  // Optimizer ranges over this unit's slice of rank `rank` (offsets relative to the slice).
  std::vector<optim::ParamRange> slice_ranges(int rank, double weight_decay) const;
  // The pieces of the parameters in rank `rank`'s slice (shard_offset relative to the slice; slot
  // indexes params()). Checkpoints map them to per-parameter element ranges.
  std::vector<OwnedPiece> slice_pieces(int rank) const { return layout_.owned_pieces(rank); }

 private:
  // Throws an internal error naming the unit, `operation` and the state unless the state is one
  // of `from`; then moves to `to`.
  void transition(const char* operation, std::initializer_list<UnitState> from, UnitState to);
  void free_full_storage(const char* operation, UnitState to);
  // start_gather's transition to kGathering, allocating the flat storage if it is freed.
  void begin_gathering();

  std::string name_;
  std::vector<FlatParamEntry> params_;
  ShardLayout layout_;
  int64_t numel_ = 0;
  at::Tensor full_;    // [padded_numel]: the storage every parameter views
  at::Tensor shard_;   // [slice_numel]: this rank's slice (a view of the engine's shard buffer)
  at::Tensor grads_;   // [padded_numel] while kReducing, else undefined
  comm::Work gather_;  // while kGathering
  std::unique_ptr<QuantizedGather> quantized_;  // while kGathering with quantized weights
  UnitState state_ = UnitState::kGathered;
};

// The engine's units in order (0: the root), shared by reference with the stage-3 parts.
using Stage3Units = std::vector<std::unique_ptr<Stage3Unit>>;

}  // namespace deepshard::zero
