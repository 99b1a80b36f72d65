// Activation checkpointing (recompute), libtorch's missing torch.utils.checkpoint with DeepSpeed's
// options (deepspeed.checkpointing). A model opts in per region: it runs the region through
// `checkpoint(fn, inputs)`. While a Checkpointer is active on the thread (the trainer activates one
// around each training forward) and grad mode is on, the region runs without keeping its
// intermediates; only its inputs (stored as the options say) and the state of every random
// generator it draws from are kept, and backward re-runs it with gradients on. Without an active
// Checkpointer (evaluation, sampling, a model used on its own) `checkpoint` is just fn(inputs).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "deepshard/config/ds_config.h"

namespace deepshard::comm {
class Group;
}

namespace deepshard::activation {

// A checkpointable region: inputs -> one output. Anything else it uses (parameters, non-tensor
// arguments) is captured by the function; it must compute the same thing when called again.
using Region = std::function<at::Tensor(const std::vector<at::Tensor>& inputs)>;

// The model's side: runs `region` on `inputs` through the checkpointer active on this thread, if
// any; otherwise (or under no_grad) returns region(inputs).
at::Tensor checkpoint(const Region& region, const std::vector<at::Tensor>& inputs);
at::Tensor checkpoint(const std::function<at::Tensor(const at::Tensor&)>& region,
                      const at::Tensor& input);

// Times of one region in one step (profile: true), seconds summed over its micro-batches.
struct RegionTimes {
  double forward_s = 0;    // the forward without intermediates
  double recompute_s = 0;  // the forward run again in backward
  double backward_s = 0;   // back-propagation through the recomputed forward
};

class Checkpointer {
 public:
  // `options`: DeepSpeed's activation_checkpointing section (contiguous_memory_optimization needs
  // partition_activations and number_checkpoints, as in DeepSpeed). `model_parallel`: the group
  // partition_activations splits the kept inputs across (tensor parallelism); nullptr = one rank
  // (nothing to split). The group must outlive the checkpointer.
  explicit Checkpointer(const config::ActivationCheckpointingConfig& options,
                        comm::Group* model_parallel = nullptr);
  ~Checkpointer();
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  // Makes this checkpointer the thread's active one for one forward pass (RAII). Regions are
  // counted from 0 in each pass: the first number_checkpoints of them are checkpointed, the others
  // run normally.
  class Pass {
   public:
    explicit Pass(Checkpointer& owner);
    ~Pass();
    Pass(const Pass&) = delete;
    Pass& operator=(const Pass&) = delete;

   private:
    Checkpointer* owner_;
    Checkpointer* previous_;
  };

  const config::ActivationCheckpointingConfig& options() const { return options_; }
  int model_parallel_size() const;
  // Regions checkpointed in the last pass, and bytes their kept inputs hold (after the options:
  // a rank's partition, host copies or the contiguous buffer).
  int64_t last_pass_regions() const { return last_pass_regions_; }
  int64_t last_pass_kept_bytes() const { return last_pass_kept_bytes_; }
  // profile: per region (index = order in the pass), since the last take_times().
  std::vector<RegionTimes> take_times();

  // Internal state shared with the recompute function (src/activation).
  struct State;
  const std::shared_ptr<State>& state() const { return state_; }

 private:
  friend class Pass;
  void begin_pass();
  void end_pass();

  config::ActivationCheckpointingConfig options_;
  comm::Group* model_parallel_;
  std::shared_ptr<State> state_;
  int64_t last_pass_regions_ = 0;
  int64_t last_pass_kept_bytes_ = 0;
};

// The checkpointer active on this thread (nullptr: none).
Checkpointer* active_checkpointer();

}  // namespace deepshard::activation
