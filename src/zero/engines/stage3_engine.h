// ZeRO stage 3 (design §5): parameters, gradients and optimizer state all partitioned. The model
// is cut into the units it declares (deepshard/sharding/sharding_plan.h, resolved in unit_plan.h);
// the engine wraps their forwards through the model's UnitCalls. Each unit's parameters live in one
// flat storage of N rank slices (zero/stage3/unit.h, a state machine) and this rank keeps only its
// slices (zero/stage3/slice_store.h; fp32: the resident slices are also the master the optimizer
// updates). A unit is gathered before its forward and released after it; the identity function on
// its output (pre_backward.h) re-gathers it before its backward and gives its parameters a flat
// gradient buffer; when grad-accumulator hooks report all of the unit's gradients, the buffer is
// reduce-scattered into this rank's fp32 gradient shard (zero/stage3/grad_reducer.h) and the unit
// released. When units are gathered, prefetched, kept for their reuse or released is the
// coordinator's (zero/stage3/coordinator.h: trace, prefetch, live budget, reuse distance,
// persistence). The step is Engine::apply_update: global norm from the gradient shards, Adam on
// the owned shard, then the persistent units are re-gathered (the others gather afresh when they
// next run).
// Offload: offload_optimizer cpu keeps the master and Adam state in host memory (on a CPU compute
// device where they are), nvme swaps them per sub-group (SwappedAdam; ratio < 1 keeps the first
// sub-groups resident); offload_param cpu keeps the shard in host memory, nvme swaps slices
// (SliceStore).
// hpZ (zero_hpz_partition_size > 1): a released unit keeps a secondary partition over a group of
// consecutive ranks, which its later gathers read until the next update (secondary_partition.h).
// A model built under zero.Init (partitioned_build.h) brings its blocks as released units with
// their slices; the engine adopts them instead of partitioning full blocks.
// MiCS (zero_optimization.mics_shard_size, zero/stage3/mics_groups.h): everything above runs over
// the shard group instead of the whole group, and the gradient shard is averaged over the replica
// group at the accumulation boundary; replica group 0 writes the checkpoints' pieces.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "deepshard/sharding/sharding_plan.h"
#include "optim/adam.h"
#include "zero/engine_base.h"
#include "zero/stage3/coordinator.h"
#include "zero/stage3/grad_reducer.h"
#include "zero/stage3/mics_groups.h"
#include "zero/stage3/secondary_partition.h"
#include "zero/stage3/slice_store.h"
#include "zero/stage3/unit.h"
#include "zero/stage3/unit_plan.h"
#include "zero/swapped_adam.h"

namespace torch::autograd {
struct Node;
}

namespace deepshard::zero {

class Stage3Engine : public EngineBase {
 public:
  // `build`: the model's blocks were partitioned as it was built (zero.Init); they are adopted.
  Stage3Engine(std::shared_ptr<torch::nn::Module> model, const config::DsConfig& config,
               comm::Group& group, PartitionedBuild* build = nullptr);
  ~Stage3Engine() override;

  void with_full_parameters(const std::function<void()>& fn) override;
  int64_t persistent_parameters() const override;
  int64_t largest_unit_parameters() const override;
  void set_model_parallel(ModelParallelAxis axis) override;

 protected:
  void before_backward(bool boundary) override;
  void after_backward(bool boundary) override;
  at::Tensor reduced_grads() override;
  double global_grad_norm(const at::Tensor& reduced) override;
  std::vector<GradPiece> reduced_pieces() const override;
  bool reduced_is_sharded() const override { return true; }
  void update_parameters(const UpdateRates& rates, float grad_factor) override;
  void zero_grads() override;
  std::vector<StatePiece> state_view(StateUse use) override;
  optim::FlatAdam& optimizer() override { return *adam_; }
  void publish_loaded_state() override;

 private:
  // The constructor's steps, in order.
  // The units (adopted from `build` or partitioned from the model).
  void create_units(PartitionedBuild* build);
  // Where the slices live (the shard buffer, swap files), the units moved onto them, which units
  // stay gathered.
  void place_slices();
  // The fp32 master and gradient shard, Adam.
  void create_optimizer();
  // Grad-accumulator hooks (a unit's gradients complete) and pre-backward callbacks per unit.
  void add_unit_hooks();
  // Installs run_unit() as the model's outermost unit wrapper (removed by the destructor).
  void install_unit_wrapper();

  // The forward of the plan's unit `declared` (`body`) with its engine unit gathered.
  at::Tensor run_unit(size_t declared, const std::function<at::Tensor()>& body);
  std::vector<std::string> unit_names() const;
  void before_unit_backward(size_t u);
  void on_grad_ready(size_t u);
  // Reduce-scatter the unit's gradients into its slice of the gradient shard and release the unit.
  void reduce_unit(size_t u);

  std::unique_ptr<MicsGroups> mics_;  // MiCS's groups (null: plain stage 3)
  // The group the units are partitioned over: MiCS's shard group, else the engine's group.
  comm::Group& shard_group_;
  sharding::ShardingPlan declared_;  // the model's own declaration (its UnitCalls)
  UnitPlan plan_;
  int wrapper_id_ = 0;  // of run_unit in the model's UnitCalls
  Stage3Units units_;
  std::vector<bool> prebuilt_;  // partitioned while the model was built (zero.Init)
  std::unique_ptr<SliceStore> slices_;
  std::unique_ptr<SecondaryPartitions> secondary_;  // hpZ (zero_hpz_partition_size > 1), else null
  std::unique_ptr<UnitCoordinator> coordinator_;
  std::unique_ptr<GradReducer> reducer_;
  at::Tensor master_;  // fp32 master of the shard (the resident slices themselves in fp32)
  std::unique_ptr<optim::FlatAdam> adam_;
  std::unique_ptr<SwappedAdam> swapped_;  // offload_optimizer nvme
  bool master_swapped_ = false;           // SwappedAdam swaps the fp32 master too
  at::Tensor staged_master_, staged_exp_avg_, staged_exp_avg_sq_;  // nvme checkpoints
  std::vector<std::function<void()>> pre_backward_;  // per unit, referenced by autograd nodes
  bool in_backward_ = false;
  // Training forwards of units whose backward has not started yet: a pass (the trace's) ends
  // with the backward that brings it to 0, or at the window's end.
  int64_t forwards_pending_ = 0;
  bool holding_all_ = false;  // inside with_full_parameters()
  // Strong references: autograd holds grad accumulators weakly, and the hooks live on them.
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
};

}  // namespace deepshard::zero
