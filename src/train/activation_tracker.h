// The training loop's activation side: the checkpointer (train.activation_checkpointing with
// DeepSpeed's activation_checkpointing options) around each training forward, the activation
// meter (activation bytes kept at the peak, counted from the host allocator) around the whole
// loop, and their per-step fields for metrics.jsonl (profile times per region, when asked).
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>

#include "activation/activation_meter.h"
#include "activation/checkpoint.h"
#include "deepshard/config/run_config.h"
#include "train/memory_profile.h"

namespace deepshard::train {

class ActivationTracker {
 public:
  // Installs the meter on the calling thread (the training thread) for the tracker's lifetime.
  // `rank0` prints the info and warning lines. `model_parallel`: the tensor-parallel group that
  // partition_activations splits the kept inputs across (nullptr: one rank, nothing to split).
  ActivationTracker(const config::RunConfig& run, bool rank0, comm::Group* model_parallel = nullptr);
  ~ActivationTracker();

  // One micro-batch's forward (`forward` returns the loss), under the checkpointer when
  // checkpointing is on, inside the meter's forward window.
  at::Tensor forward(const std::function<at::Tensor()>& forward);

  bool checkpointing() const { return checkpointer_ != nullptr; }
  // Ends the step (call after its last backward): its activation peaks go to last_step(), and
  // with checkpointing its fields for metrics.jsonl ({"checkpointed_regions",
  // "checkpoint_kept_bytes"} and, with profile, "checkpoint_profile") are returned.
  nlohmann::json end_step();
  const ActivationBytes& last_step() const { return last_; }     // of the step end_step() ended
  const ActivationBytes& run_peak() const { return run_peak_; }  // over the run so far

 private:
  std::unique_ptr<activation::Checkpointer> checkpointer_;
  activation::ActivationMeter meter_;
  std::unique_ptr<activation::ActivationMeter::Scope> scope_;
  ActivationBytes last_, run_peak_;
};

}  // namespace deepshard::train
