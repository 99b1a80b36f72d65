// GradReducer: the gradients of ZeRO-3 units, from their backward to this rank's fp32 gradient
// shard. When a unit's backward starts, its parameters' .grad become views of one flat buffer
// (Stage3Unit::begin_grads); grad-accumulator hooks count its gradients in, and once all arrived
// the buffer is reduce-scattered (average, in the wire dtype of communication_data_type) into the
// unit's slice of the gradient shard: written by the accumulation window's first micro-step, added
// into by later ones (through a receive buffer). With overlap_comm the reduction runs on while the
// backward goes on, at most two in flight; otherwise each completes at once. With
// zero_quantized_gradients (ZeRO++ qgZ, N > 1) the reduce-scatter is QuantizedReduceScatter's int8
// all-to-all instead (quantized_reduce.h; its cross-node stage runs when the reduction is
// completed), and communication_data_type does not apply.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "comm/grad_reduction.h"
#include "deepshard/config/ds_config.h"
#include "deepshard/zero/memory_ledger.h"
#include "zero/stage3/quantized_reduce.h"
#include "zero/stage3/slice_store.h"
#include "zero/stage3/unit.h"

namespace deepshard::zero {

class GradReducer {
 public:
  // Allocates the gradient shard (one element per element of `slices`' shard) and, with gradient
  // accumulation, the receive buffers.
  GradReducer(Stage3Units& units, const SliceStore& slices, const config::DsConfig& config,
              comm::Group& group, MemoryLedger& ledger);
  ~GradReducer();

  // fp32 reduced gradients of this rank's shard, summed over the window's micro-steps.
  const at::Tensor& grad_shard() const { return grad_shard_; }
  void zero() { grad_shard_.zero_(); }

  // A backward starts: every unit's gradients are to come; `first_micro_step` of its window.
  void begin_backward(bool first_micro_step);
  // Unit u's backward starts (it is gathered): its gradient buffer.
  void begin_unit(size_t u);
  // One of u's gradients arrived; true when it was the last.
  bool grad_ready(size_t u);
  bool reduced(size_t u) const { return reduced_[u]; }
  // Starts reducing u's gradient buffer (taken from the unit) into its slice of the shard.
  void start(size_t u);
  // Without overlap_comm: completes the reduction just started.
  void finish_unless_overlapping();
  // Completes every reduction in flight.
  void finish_all();

 private:
  struct Reduction {  // one unit's reduce-scatter in flight
    comm::Work work;
    std::unique_ptr<QuantizedReduceScatter::Reduction> quantized;  // qgZ, instead of `work`
    at::Tensor grads;  // the unit's full gradients (the collective's input), freed on completion
    at::Tensor out;    // receive buffer when accumulating (added into slice), else the slice
    at::Tensor slice;
    int64_t ledger_bytes = 0;  // of the unit's gradient buffer
  };
  void finish_oldest();

  Stage3Units& units_;
  const SliceStore& slices_;
  MemoryLedger& ledger_;
  const bool overlap_comm_;
  at::Tensor grad_shard_;
  // Accumulation > 1: reduce-scatter outputs, added into grad_shard_ (two with overlap_comm).
  std::vector<at::Tensor> receive_;
  std::unique_ptr<comm::GradReduction> reduction_;
  std::unique_ptr<QuantizedReduceScatter> quantized_;  // zero_quantized_gradients, N > 1
  std::deque<Reduction> reducing_;                     // in flight, oldest first
  size_t reductions_started_ = 0;                      // picks the receive buffer
  // Per backward: the unit's gradients still to arrive, and whether it was reduced.
  std::vector<size_t> pending_;
  std::vector<bool> reduced_;
  bool first_micro_step_ = true;
};

}  // namespace deepshard::zero
