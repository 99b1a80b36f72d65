// The training engine, in the shape of DeepSpeed's: `initialize(model, config, group)`, then per
// micro-batch `backward(loss)` and `step()`; the optimizer update happens at the gradient
// accumulation boundary (every gradient_accumulation_steps-th call of step()). The ZeRO stage in
// the config chooses the implementation behind this interface (the user's API only: the stages'
// interface is private, src/zero/engine_base.h).
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "deepshard/checkpoint/tensor_slice.h"
#include "deepshard/comm/group.h"
#include "deepshard/config/ds_config.h"
#include "deepshard/zero/memory_ledger.h"

namespace torch::nn {
class Module;
}

namespace deepshard::sharding {
class UnitCalls;
}

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
  std::string saved_layout;  // "data 2 x pipeline 1 x tensor 2" (the manifest's layout)
};

// Model parallelism (deepshard/parallel/, docs/parallel.md): the engine's group is the
// data-parallel axis, and the model on this rank is a part of one replica spread over `group` (the
// tensor axis). A parameter for which `replicated(name)` is true holds the same value on every
// rank of `group`; the others are slices. The global gradient norm (clipping, the overflow check)
// then sums the slices over `group` and counts the replicated parameters once, as Megatron's and
// DeepSpeed's clip_grad_norm do. With the overflow check (fp16, bf16.check_grad_overflow) the
// pieces a rank does not count are checked too, in the same all-reduces: every rank of every axis
// skips the same steps.
// `counted` replaces that rule when set: whether this rank adds the squares of parameter `name`,
// summed over `group` then (a pipeline counts the tied embedding on its first stage only; a
// pipeline of tensor-parallel stages, whose group spans both axes, counts a parameter where it
// is split or on tensor rank 0, and the embedding on the first stage).
struct ModelParallelAxis {
  comm::Group* group = nullptr;
  std::function<bool(const std::string& name)> replicated;
  std::function<bool(const std::string& name)> counted;
};

// A model-parallel job's checkpoints (docs/checkpoint.md, "Model-parallel layouts"): the engine's
// group is one data-parallel axis, but a checkpoint is the whole job's. Given this, save and load
// run their protocol (agreement, one shard file per rank of `job`, manifest, publish) over `job`,
// the parameter table is the whole model's (the union over the job's ranks, whole shapes), and
// every record is a range of a whole parameter's elements: `slice(name)` says which part of the
// whole parameter this rank's `name` is and whether this rank writes it (one tensor rank writes a
// replicated parameter). `data`, `pipeline`, `tensor`: the grid's sizes, written as the manifest's
// layout (the RNG states are restored only when both the world size and the layout are the same).
struct CheckpointLayout {
  comm::Group* job = nullptr;
  std::function<checkpoint::TensorSlice(const std::string& name)> slice;
  int data = 1, pipeline = 1, tensor = 1;
};

// A model that is not a torch::nn::Module, such as a Python torch.nn.Module (python/deepshard):
// its submodule tree holding the model's own tensors. The engine trains these tensors in place
// (nothing is copied: what the engine shards, casts or updates, the model sees). A tensor found at
// several places (a tied weight) is one parameter, named by its first place. ZeRO-3: `units` are
// the paths of the submodules ("blocks.0") whose forwards the model runs through calls() (the
// hook point of deepshard/sharding/sharding_plan.h; unit i is units[i]), in forward order; a
// trainable tensor held inside a unit and at a place outside it is declared tied (it stays in the
// always-gathered root unit).
class ModuleTree {
 public:
  struct Node {
    std::vector<std::pair<std::string, at::Tensor>> parameters;  // the module's own
    std::vector<std::pair<std::string, at::Tensor>> buffers;
    std::vector<std::pair<std::string, Node>> children;
  };
  // Throws ConfigError naming a unit path that is not a submodule, or a unit inside another.
  ModuleTree(const Node& root, std::vector<std::string> units = {});
  // The tree as the libtorch module the engines take (the same tensors; its sharding plan
  // declares the units and ties).
  const std::shared_ptr<torch::nn::Module>& module() const { return module_; }
  sharding::UnitCalls& calls() const { return *calls_; }

 private:
  std::shared_ptr<torch::nn::Module> module_;
  sharding::UnitCalls* calls_;  // owned by module_
};

// The user's engine. Implementations (one per stage) live behind it (src/zero/engine_base.h).
class Engine {
 public:
  // Builds the engine for config.zero.stage. The model's parameters, frozen ones and buffers are
  // made identical on every rank (broadcast from rank 0). Under bf16.enabled (fp16.enabled) an
  // fp32 model is cast to bf16 (fp16) first, as DeepSpeed does; a model in another dtype than
  // the config's is refused (docs/zero.md, "Mixed precision"). Stage 3 shards the units the model
  // declares (deepshard/sharding/sharding_plan.h). Throws ConfigError for features not supported
  // yet. `build`: the model was built under zero.Init (partitioned_build.h; stage 3 only), its
  // units are adopted.
  static std::unique_ptr<Engine> initialize(std::shared_ptr<torch::nn::Module> model,
                                            const config::DsConfig& config, comm::Group& group,
                                            PartitionedBuild* build = nullptr);
  // The same from a DeepSpeed JSON config file (as deepspeed.initialize(config=PATH)), resolved
  // for the group's size.
  static std::unique_ptr<Engine> initialize(std::shared_ptr<torch::nn::Module> model,
                                            const std::string& config_path, comm::Group& group,
                                            PartitionedBuild* build = nullptr);
  // A model given as a ModuleTree (which must outlive the engine).
  static std::unique_ptr<Engine> initialize(const ModuleTree& model, const config::DsConfig& config,
                                            comm::Group& group, PartitionedBuild* build = nullptr);
  virtual ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // DeepSpeed's `loss = engine(input_ids, labels)`: the model's forward on a micro-batch giving its
  // mean loss, as the function given to set_forward computes it (the engine knows no model's
  // forward: train::initialize sets a deepshard model's). Throws Error when none is set.
  using Forward = std::function<at::Tensor(const at::Tensor& input_ids, const at::Tensor& labels)>;
  void set_forward(Forward forward) { forward_ = std::move(forward); }
  at::Tensor operator()(const at::Tensor& input_ids, const at::Tensor& labels);

  // Backward of `loss` (the mean loss of this rank's micro-batch), scaled by
  // loss_scale()/gradient_accumulation_steps; gradients are reduced across ranks at the boundary.
  virtual void backward(const at::Tensor& loss) = 0;
  // A pipeline stage's backward (docs/parallel.md): `output` is this stage's output and `grad` the
  // gradient of the loss with respect to it, received from the next stage. No scaling is applied:
  // the gradient already carries the loss scale and 1/gradient_accumulation_steps, which the last
  // stage's backward(loss) applied. Otherwise as backward(loss).
  virtual void backward(const at::Tensor& output, const at::Tensor& grad) = 0;
  // To be called after every backward(). Applies the optimizer at the boundary.
  virtual StepResult step() = 0;

  virtual bool is_gradient_accumulation_boundary() const = 0;  // the next backward ends the window
  virtual int64_t global_steps() const = 0;  // optimizer steps taken (incl. skipped)
  virtual int64_t skipped_steps() const = 0;
  virtual int64_t micro_steps() const = 0;
  virtual double current_lr() const = 0;       // the rate the next update will use
  virtual double loss_scale() const = 0;       // fp16's current scale; 1 otherwise
  virtual int64_t num_parameters() const = 0;  // trainable ones (tied once)
  virtual const config::DsConfig& config() const = 0;
  virtual comm::Group& group() = 0;
  virtual const MemoryLedger& ledger() const = 0;
  // Runs `fn` with every parameter of the model holding its full value (a collective at stage 3:
  // every unit is gathered for `fn` and released after it; the other stages just run `fn`).
  virtual void with_full_parameters(const std::function<void()>& fn) = 0;
  // Stage 3, for the estimator: the elements that stay gathered (root and persistent units) and
  // the largest unit's; 0 at the other stages.
  virtual int64_t persistent_parameters() const = 0;
  virtual int64_t largest_unit_parameters() const = 0;
  // Declares the model-parallel axis (see ModelParallelAxis) before the first step; every rank of
  // the job calls it. Every stage takes it (stage 3: over its units' slices).
  virtual void set_model_parallel(ModelParallelAxis axis) = 0;
  // Pipeline parallelism (docs/parallel.md): the window's gradients are reduced over the group
  // once, by the boundary step() (before the norm and the update), rather than during the last
  // backward; `before_reduction` runs first (the pipeline sums the tied embedding's two copies
  // there). DeepSpeed's PipelineEngine turns off the engine's backward all-reduce the same way: a
  // stage's last backward must send its input's gradient before the stages meet again. Stages 0
  // and 1 only (stage 2 reduces every micro-step, stage 3 gathers per unit): ConfigError naming
  // zero_optimization.stage otherwise. Call before the first backward.
  virtual void reduce_at_step(std::function<void()> before_reduction) = 0;
  // The window's gradient of trainable parameter `name` where the engine accumulates it before
  // the reduction, shaped as the parameter: its .grad in an fp32 model, its region of the fp32
  // accumulation buffer in a bf16/fp16 one (autograd's low-precision .grad has been added there
  // and zeroed after every backward). For `before_reduction`: the pipeline sums the tied
  // embedding's two copies in it, in fp32. Stages 0 and 1 (Error otherwise).
  virtual at::Tensor accumulated_grad(const std::string& name) = 0;
  // Pipeline parallelism at stages 2 and 3, whose gradients are reduced during each backward:
  // `fn` runs in every boundary step(), once the window's gradients are reduced over the group and
  // before the norm and the update (the pipeline sums the tied embedding's two copies there,
  // through reduced_grad and set_reduced_grad: the sum of the reduced copies is the reduction of
  // their sum). Call before the first backward.
  virtual void after_reduction(std::function<void()> fn) = 0;
  // The window's reduced gradient of trainable parameter `name`, whole, fp32 and shaped as the
  // parameter, on every rank of the group: each rank's pieces of it assembled (a collective over
  // the group when the stage shards gradients). For after_reduction's function.
  virtual at::Tensor reduced_grad(const std::string& name) = 0;
  // Writes `whole` (shaped as reduced_grad returns it) into this rank's pieces of `name`'s reduced
  // gradient.
  virtual void set_reduced_grad(const std::string& name, const at::Tensor& whole) = 0;
  // Declares the job's layout for checkpoints (see CheckpointLayout) before the first save or
  // load; every rank of the job calls it. Without it the job is the engine's group.
  virtual void set_checkpoint_layout(CheckpointLayout layout) = 0;

  // Checkpoints (docs/checkpoint.md). Both are collective: every rank calls them with the same
  // arguments; the ranks first agree on the operation, directory and tag (a rank calling something
  // else, or not calling, is an error on the others, never a hang: CommError after the group's
  // timeout at worst). save_checkpoint writes <dir>/<tag>.tmp/ (each rank its shard file, rank 0
  // the manifest with the engine state, every rank's RNG state and `client_state_json`, a JSON
  // object, and the module state: buffers and frozen parameters), renames it to <dir>/<tag> once
  // every rank has written and synced, and points <dir>/latest at it. Refused inside a
  // gradient-accumulation window. Any rank failing is an error on every rank, and the previous
  // `latest` stays.
  virtual void save_checkpoint(const std::string& dir, const std::string& tag,
                               const std::string& client_state_json = "{}") = 0;
  // Loads <dir>/<tag> ("" = latest) saved at any world size and stage: each rank reads the
  // element ranges it owns of every parameter's fp32 master and Adam moments, and the module
  // state. Restores the step counters, loss scaler and LR schedule position, and the RNG state
  // when the world size is the same. A checkpoint of another model (parameter names or shapes) is
  // an error.
  virtual LoadedCheckpoint load_checkpoint(const std::string& dir, const std::string& tag = "") = 0;

 protected:
  Engine() = default;

 private:
  Forward forward_;
};

}  // namespace deepshard::zero
