// EngineBase: what every stage shares behind the public Engine (include/deepshard/zero/engine.h;
// LevelDB's DB / DBImpl split): the accumulation window, the LR schedule, the loss scaler, the
// update at the boundary (norm, overflow, unscale and clip), checkpoints, the module state
// (buffers and frozen parameters: broadcast at start, saved and restored), and the dtype contract
// (the model cast to the config's dtype). A stage implements the hooks below.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "optim/loss_scaler.h"
#include "deepshard/zero/engine.h"
#include "zero/module_state.h"

namespace deepshard::optim {
class FlatAdam;
class LrSchedule;
}  // namespace deepshard::optim

namespace deepshard::checkpoint {
class CheckpointReader;
}

namespace deepshard::comm {
class PowerSgd;
}

namespace deepshard::zero {

class EngineBase : public Engine {
 public:
  ~EngineBase() override;

  void backward(const at::Tensor& loss) override;
  void backward(const at::Tensor& output, const at::Tensor& grad) override;
  StepResult step() override;
  bool is_gradient_accumulation_boundary() const override;
  int64_t global_steps() const override { return global_steps_; }
  int64_t skipped_steps() const override { return skipped_steps_; }
  int64_t micro_steps() const override { return micro_steps_; }
  double current_lr() const override;
  double loss_scale() const override { return scaler_.scale(); }
  int64_t num_parameters() const override { return num_parameters_; }
  const config::DsConfig& config() const override { return config_; }
  comm::Group& group() override { return group_; }
  const MemoryLedger& ledger() const override { return ledger_; }
  void with_full_parameters(const std::function<void()>& fn) override { fn(); }
  int64_t persistent_parameters() const override { return 0; }
  int64_t largest_unit_parameters() const override { return 0; }
  void set_model_parallel(ModelParallelAxis axis) override;
  void reduce_at_step(std::function<void()> before_reduction) override;
  at::Tensor accumulated_grad(const std::string& name) override;
  void after_reduction(std::function<void()> fn) override;
  at::Tensor reduced_grad(const std::string& name) override;
  void set_reduced_grad(const std::string& name, const at::Tensor& whole) override;
  void set_checkpoint_layout(CheckpointLayout layout) override;
  void save_checkpoint(const std::string& dir, const std::string& tag,
                       const std::string& client_state_json = "{}") override;
  LoadedCheckpoint load_checkpoint(const std::string& dir, const std::string& tag = "") override;

 protected:
  // Casts the model to the config's dtype (or refuses it) and makes its module state rank 0's;
  // the stage's constructor then flattens the parameters.
  EngineBase(std::shared_ptr<torch::nn::Module> model, const config::DsConfig& config,
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
  // Where each parameter's gradient lies in reduced_grads(): `numel` elements at `offset` belong
  // to the flat parameter `name` (a stage-1/2 shard holds pieces of some of them). Used by the
  // model-parallel norm; a stage without it refuses set_model_parallel.
  struct GradPiece {
    const std::string* name = nullptr;
    int64_t offset = 0, numel = 0;
    int64_t param_offset = 0;  // where the piece starts in the flattened parameter
  };
  virtual std::vector<GradPiece> reduced_pieces() const;
  // Whether reduced_grads() is this rank's shard (the norm sums over the group), or all of them.
  virtual bool reduced_is_sharded() const = 0;
  // Adam with `rates` on the fp32 parameters this rank updates, gradients multiplied by
  // `grad_factor` (unscaling and clipping), then the new values published into the model.
  virtual void update_parameters(const UpdateRates& rates, float grad_factor) = 0;
  // Clears every gradient buffer (after a step, applied or skipped).
  virtual void zero_grads() = 0;
  // set_reduced_grad changed reduced_grads(): a stage that keeps another copy of them for the
  // update (the offloaded optimizer's host gradients) refreshes it.
  virtual void reduced_grads_changed() {}

  // fp16, and bf16 with bf16.check_grad_overflow: the step is skipped when a gradient overflowed.
  bool checks_overflow() const;
  // fp16 (and bf16 with bf16.check_grad_overflow): whether the reduced gradients overflowed on
  // any rank. `global_norm` is this rank's view of the global gradient norm; the ranks agree
  // through an all-reduce (max) of a float flag. Always false otherwise (no collective).
  bool overflow_on_any_rank(double global_norm);
  // One update at the boundary: norm, overflow check (fp16: skip on every rank), unscale and
  // clip as one factor, update_parameters, zero_grads.
  StepResult apply_update(const UpdateRates& rates);

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
  ModuleState module_state_;  // buffers and frozen parameters
  // The config's `compression` (PowerSGD) over the whole gradient, set by stages 0 and 1; its
  // state is checkpointed per rank.
  std::unique_ptr<comm::PowerSgd> compression_;

 private:
  // The hooks around one backward pass (`run` runs it); `boundary`: its gradients are reduced.
  void run_backward(const std::function<void()>& run);
  // global_grad_norm over the data group and the model-parallel axis (set_model_parallel).
  double model_parallel_grad_norm(const at::Tensor& reduced);
  // The group the checkpoint protocol runs over: the layout's job, else the engine's group.
  comm::Group& checkpoint_job();
  // The manifest's "layout": {"data", "pipeline", "tensor"} sizes.
  nlohmann::json checkpoint_layout_json() const;
  // Restores the buffers and frozen parameters a checkpoint saved (every rank reads them).
  void load_module_state(const checkpoint::CheckpointReader& reader);
  // Restores the PowerSGD state a checkpoint saved (compression_ is set).
  void load_compression(const checkpoint::CheckpointReader& reader);

  int64_t micro_steps_ = 0;
  int64_t global_steps_ = 0;
  int64_t skipped_steps_ = 0;
  int64_t applied_steps_ = 0;  // drives the LR schedule (skipped steps do not advance it)
  ModelParallelAxis model_parallel_;  // group null: none
  // reduce_at_step: the reduction runs in the boundary step(), after this.
  std::function<void()> before_reduction_;
  // after_reduction: runs in the boundary step(), before the norm.
  std::function<void()> after_reduction_;
  CheckpointLayout checkpoint_layout_;  // job null: the engine's group, whole parameters
};

}  // namespace deepshard::zero
