// The training engine, in the shape of DeepSpeed's: `initialize(model, config, group)`, then per
// micro-batch `backward(loss)` and `step()`; the optimizer update happens at the gradient
// accumulation boundary (every gradient_accumulation_steps-th call of step()). The ZeRO stage in
// the config chooses the implementation behind this interface.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "deepshard/comm/group.h"
#include "deepshard/config/ds_config.h"
#include "deepshard/optim/loss_scaler.h"
#include "deepshard/zero/memory_ledger.h"

namespace torch::nn {
class Module;
}

namespace deepshard::optim {
class FlatAdam;
class LrSchedule;
}  // namespace deepshard::optim

namespace deepshard::zero {

class PartitionedBuild;

struct StepResult {
  bool boundary = false;  // this step() call ended an accumulation window
  bool applied = false;  // the optimizer updated the parameters (false: not a boundary, or skipped)
  bool skipped = false;  // overflow: the update was skipped on every rank
  double grad_norm = 0.0;  // global L2 norm of the (unscaled) gradient, before clipping
  double lr = 0.0;         // learning rate used by this update
  double loss_scale = 1.0;
};

// What load_checkpoint restored.
struct LoadedCheckpoint {
  std::string path;  // the tag directory
  std::string tag;
  std::string client_state_json;  // as given to save_checkpoint
  int64_t global_steps = 0;
  int saved_world_size = 0;
  int saved_stage = 0;
};

class Engine {
 public:
  // Builds the engine for config.zero.stage. Parameters are made identical on every rank
  // (broadcast from rank 0). Throws ConfigError for features not supported yet. `build`: the
  // model was built under zero.Init (partitioned_build.h; stage 3 only), its units are adopted.
  static std::unique_ptr<Engine> initialize(std::shared_ptr<torch::nn::Module> model,
                                            const config::DsConfig& config, comm::Group& group,
                                            PartitionedBuild* build = nullptr);
  virtual ~Engine();

  // Backward of `loss` (the mean loss of this rank's micro-batch), scaled by
  // loss_scale()/gradient_accumulation_steps; gradients are reduced across ranks at the boundary.
  void backward(const at::Tensor& loss);
  // To be called after every backward(). Applies the optimizer at the boundary.
  StepResult step();

  bool is_gradient_accumulation_boundary() const;         // the next backward ends the window
  int64_t global_steps() const { return global_steps_; }  // optimizer steps taken (incl. skipped)
  int64_t skipped_steps() const { return skipped_steps_; }
  int64_t micro_steps() const { return micro_steps_; }
  double current_lr() const;                             // the rate the next update will use
  double loss_scale() const { return scaler_.scale(); }  // fp16's current scale; 1 otherwise
  int64_t num_parameters() const { return num_parameters_; }
  const config::DsConfig& config() const { return config_; }
  comm::Group& group() { return group_; }
  const MemoryLedger& ledger() const { return ledger_; }
  // Runs `fn` with every parameter of the model holding its full value (a collective at stage 3:
  // every unit is gathered for `fn` and released after it; the other stages just run `fn`).
  virtual void with_full_parameters(const std::function<void()>& fn) { fn(); }
  // Stage 3, for the estimator: the elements that stay gathered (root and persistent units) and
  // the largest unit's; 0 at the other stages.
  virtual int64_t persistent_parameters() const { return 0; }
  virtual int64_t largest_unit_parameters() const { return 0; }

  // Checkpoints (docs/checkpoint.md). Both are collective: every rank calls them with the same
  // arguments; the ranks first agree on the operation, directory and tag (a rank calling something
  // else, or not calling, is an error on the others, never a hang: CommError after the group's
  // timeout at worst). save_checkpoint writes <dir>/<tag>.tmp/ (each rank its shard file, rank 0
  // the manifest with the engine state, every rank's RNG state and `client_state_json`, a JSON
  // object), renames it to <dir>/<tag> once every rank has written and synced, and points
  // <dir>/latest at it. Refused inside a gradient-accumulation window. Any rank failing is an
  // error on every rank, and the previous `latest` stays.
  void save_checkpoint(const std::string& dir, const std::string& tag,
                       const std::string& client_state_json = "{}");
  // Loads <dir>/<tag> ("" = latest) saved at any world size and stage: each rank reads the
  // element ranges it owns of every parameter's fp32 master and Adam moments. Restores the step
  // counters, loss scaler and LR schedule position, and the RNG state when the world size is the
  // same. A checkpoint of another model (parameter names or shapes) is an error.
  LoadedCheckpoint load_checkpoint(const std::string& dir, const std::string& tag = "");

 protected:
  Engine(std::shared_ptr<torch::nn::Module> model, const config::DsConfig& config,
         comm::Group& group);

  // Called before loss.backward(); `boundary`: gradients must be reduced during this backward.
  virtual void before_backward(bool boundary) = 0;
  // Called after loss.backward() returns (finish reductions started from hooks).
  virtual void after_backward(bool boundary) = 0;
  // What the schedule sets for one update: the rate, and Adam's betas when it cycles momentum.
  struct UpdateRates {
    double lr = 0.0;
    std::optional<double> beta1, beta2;
    double loss_scale = 1.0;  // the gradients are scaled by it (fp16)
  };
  // The gradients this rank holds after the reduction (all of them, or its shard), fp32.
  virtual at::Tensor reduced_grads() = 0;
  // The global L2 norm of the gradients, from reduced_grads() (a collective when they are sharded).
  virtual double global_grad_norm(const at::Tensor& reduced) = 0;
  // Adam with `rates` on the fp32 parameters this rank updates, gradients multiplied by
  // `grad_factor` (unscaling and clipping), then the new values published into the model.
  virtual void update_parameters(const UpdateRates& rates, float grad_factor) = 0;
  // Clears every gradient buffer (after a step, applied or skipped).
  virtual void zero_grads() = 0;

  // fp16 (and bf16 with bf16.check_grad_overflow): whether the reduced gradients overflowed on
  // any rank. `global_norm` is this rank's view of the global gradient norm; the ranks agree
  // through an all-reduce (max) of a float flag. Always false otherwise (no collective).
  bool overflow_on_any_rank(double global_norm);
  // One update at the boundary: norm, overflow check (fp16: skip on every rank), unscale and
  // clip as one factor, update_parameters, zero_grads.
  StepResult apply_update(const UpdateRates& rates);
  // Test hook: DEEPSHARD_TEST_INF_AT_STEP=S with DEEPSHARD_TEST_INF_RANK=R (default 0) makes rank R
  // write +inf into element 0 of `grads` at optimizer step S (1-based), before the overflow check.
  void maybe_inject_inf(const at::Tensor& grads) const;

  // Checkpoint hooks of a stage. A piece: elements [begin, end) of the flattened parameter `name`
  // with fp32 views of their master weights and Adam moments in this rank's buffers.
  struct StatePiece {
    std::string name;
    int64_t begin = 0, end = 0;
    at::Tensor master, exp_avg, exp_avg_sq;
  };
  enum class StateUse {
    kSave,  // the pieces this rank writes (every element saved once across the ranks)
    kLoad,  // every piece this rank holds state for (replicated state: all of it)
  };
  virtual std::vector<StatePiece> state_view(StateUse use) = 0;
  virtual optim::FlatAdam& optimizer() = 0;
  // After the pieces were loaded: publish the masters into the model's parameters (casting,
  // all-gathering: a collective).
  virtual void publish_loaded_state() = 0;

  std::shared_ptr<torch::nn::Module> model_;
  config::DsConfig config_;
  comm::Group& group_;
  MemoryLedger ledger_;
  std::unique_ptr<optim::LrSchedule> schedule_;
  int64_t num_parameters_ = 0;
  // Mixed precision: the parameters are not fp32 (bf16 or fp16 model); set from the flat buffer.
  bool low_precision_params_ = false;
  optim::LossScaler scaler_;

 private:
  int64_t micro_steps_ = 0;
  int64_t global_steps_ = 0;
  int64_t skipped_steps_ = 0;
  int64_t applied_steps_ = 0;  // drives the LR schedule (skipped steps do not advance it)
};

}  // namespace deepshard::zero
