// The public sharding API: how a libtorch module names its ZeRO-3 sharding units, in the spirit of
// PyTorch FSDP2's fully_shard (a unit is FSDP2's parameter group: the parameters gathered,
// released and reduced together). deepshard never learns the module's type: the module
//
//   1. keeps a `UnitCalls` and calls its blocks' forwards through it (libtorch modules have no
//      forward hooks, so this is the hook point engines wrap: gather before, release after,
//      pre-backward re-gather, trace, prefetch);
//   2. implements `Shardable::sharding_plan()`, naming its units in forward order, the
//      parameters that are tied (used outside their own module) and, for tensor parallelism, how
//      its parameters split over tensor ranks (tensor_plan.h);
//   3. optionally takes a `UnitBuilt` callback in its constructor and calls it with each unit as
//      soon as the unit is built (zero.Init: zero::PartitionedBuild partitions it right away).
//
// Everything else follows from the parameters: the root unit holds every trainable parameter in
// no unit (and the tied ones; it stays gathered, as FSDP keeps its root), frozen parameters
// (requires_grad false) and buffers stay whole on every rank (broadcast from rank 0, no gradient,
// no optimizer state, saved in checkpoints as module state). docs/sharding_api.md has an example.
#pragma once

#include <torch/nn/module.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "deepshard/sharding/tensor_plan.h"

namespace deepshard::sharding {

// One unit's forward, as the model computes it.
using UnitBody = std::function<at::Tensor()>;
// A wrapper around unit forwards: runs `body` (possibly with work before and after) and returns
// its output. `unit` is the unit's index in the plan (0 = the first declared unit).
using UnitWrapper = std::function<at::Tensor(size_t unit, const UnitBody& body)>;

// Levels order the wrappers of one UnitCalls: a higher level runs outside a lower one. ZeRO-3's
// gather/release is outermost, so that anything inside it (activation checkpointing's recompute)
// finds the parameters gathered.
inline constexpr int kShardingLevel = 100;
inline constexpr int kActivationCheckpointLevel = 50;

// The hook point a model keeps (one per model) and calls around every unit's forward:
//   x = unit_calls_(i, [&] { return blocks[i]->forward(x); });
// Without wrappers it just runs the body.
class UnitCalls {
 public:
  UnitCalls() = default;
  UnitCalls(const UnitCalls&) = delete;
  UnitCalls& operator=(const UnitCalls&) = delete;

  at::Tensor operator()(size_t unit, const UnitBody& body) const;

  // Installs `wrapper` at `level`; returns its id for remove(). Wrappers of the same level nest in
  // installation order (a later one inside).
  int add(UnitWrapper wrapper, int level);
  void remove(int id);
  size_t num_wrappers() const { return wrappers_.size(); }

 private:
  struct Entry {
    int id;
    int level;
    UnitWrapper wrap;
  };
  std::vector<Entry> wrappers_;  // outermost first
  int next_id_ = 1;
};

// Called by a model's constructor with unit `unit` (its index in the plan) as soon as the unit's
// module is built and initialised, before the next one exists.
using UnitBuilt = std::function<void(size_t unit, torch::nn::Module& module)>;

// The units of a model: declared by the model, read by the engines.
class ShardingPlan {
 public:
  // `calls`: the model's hook point (it must outlive every engine that uses the plan).
  explicit ShardingPlan(UnitCalls& calls) : calls_(&calls) {}

  // Declares the next unit (forward order): every trainable parameter of `module` (recursively)
  // that is not tied. `module` must be a submodule of the model. `name` labels the unit in
  // messages and traces (the parameters keep the model's own names).
  ShardingPlan& unit(std::string name, std::shared_ptr<torch::nn::Module> module);
  // Declares parameter `param` (its name in the model) tied: used by `users` too, outside the
  // module that registers it (e.g. an output head reusing the embedding). A tied parameter
  // belongs to the root unit, which is gathered whenever any of its users runs.
  ShardingPlan& tie(std::string param, std::string users);
  // Declares how the parameters split over tensor-parallel ranks (tensor_plan.h; none declared:
  // every parameter replicated, the model is not split).
  ShardingPlan& tensor_parallel(TensorPlan plan) {
    tensor_plan_ = std::move(plan);
    return *this;
  }

  struct Unit {
    std::string name;
    std::shared_ptr<torch::nn::Module> module;
  };
  struct Tied {
    std::string param;
    std::string users;
  };
  const std::vector<Unit>& units() const { return units_; }
  const std::vector<Tied>& tied() const { return tied_; }
  UnitCalls& calls() const { return *calls_; }
  const TensorPlan& tensor_plan() const { return tensor_plan_; }

 private:
  UnitCalls* calls_;
  std::vector<Unit> units_;
  std::vector<Tied> tied_;
  TensorPlan tensor_plan_;
};

// What a model implements so that engines find its plan (a dynamic_cast, not its type).
class Shardable {
 public:
  virtual ~Shardable() = default;
  virtual ShardingPlan sharding_plan() = 0;
};

}  // namespace deepshard::sharding
