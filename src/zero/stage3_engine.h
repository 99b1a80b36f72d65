// ZeRO stage 3 (design §5): parameters, gradients and optimizer state all partitioned. The model
// is cut into the units it declares (deepshard/sharding/sharding_plan.h, resolved in unit_plan.h);
// the engine wraps their forwards through the model's UnitCalls. Each unit's parameters live in one
// flat storage of N rank slices (Stage3Unit) and this rank keeps only its slices: one shard buffer
// for all units (fp32: it is also the master the optimizer updates). A unit is gathered before its
// forward and released after it; the identity function on its output (pre_backward.h) re-gathers it
// before its backward and gives its parameters a flat gradient buffer; when grad-accumulator hooks
// report all of the unit's gradients, the buffer is reduce-scattered (average) into this rank's
// fp32 gradient shard (accumulating over micro-steps), dropped, and the unit released. The root
// unit and units of at most stage3_param_persistence_threshold elements stay gathered (in unit
// order, as long as their total stays within stage3_model_persistence_threshold). Once the trace is
// known, a unit used again within stage3_max_reuse_distance elements of it (a block's forward right
// before its backward) is not released in between, if the gathered elements stay within
// stage3_max_live_parameters.
// Prefetch (DeepSpeed's parameter coordinator): the first forward + backward records the order
// units are fetched in (UnitTrace, compared across ranks); later passes, at every fetch, start
// asynchronous all-gathers of the next units in that order, at most stage3_prefetch_bucket_size
// elements per fetch and never more than stage3_max_live_parameters gathered elements (persistent
// units aside) beyond the unit fetched now. Evaluation forwards (no grad) fetch on demand. The step
// is Engine::apply_update: global norm from the gradient shards, Adam on the owned shard, then the
// persistent units are re-gathered (the others gather afresh when they next run).
// Offload: offload_optimizer cpu keeps the master and Adam state in host memory (on a CPU compute
// device where they are), nvme swaps them per sub-group (SwappedAdam; ratio < 1 keeps the first
// sub-groups resident); offload_param cpu keeps the shard in host memory.
// A model built under zero.Init (partitioned_build.h) brings its blocks as released units with
// their slices; the engine adopts them instead of partitioning full blocks.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "deepshard/offload/partition_swapper.h"
#include "deepshard/optim/adam.h"
#include "deepshard/sharding/sharding_plan.h"
#include "zero/engine_base.h"
#include "zero/fetch_check.h"
#include "zero/grad_wire.h"
#include "zero/stage3_unit.h"
#include "zero/swapped_adam.h"
#include "zero/unit_plan.h"
#include "zero/unit_trace.h"

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

  size_t num_units() const { return units_.size(); }
  const Stage3Unit& unit(size_t u) const { return *units_[u]; }
  bool persistent(size_t u) const { return persistent_[u]; }
  const UnitTrace& trace() const { return trace_; }
  void with_full_parameters(const std::function<void()>& fn) override;
  int64_t persistent_parameters() const override;
  int64_t largest_unit_parameters() const override;

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
  // The units (adopted from `build` or partitioned from the model), which stay gathered, where
  // each slice sits in the shard buffers.
  void create_units(PartitionedBuild* build);
  // The shard buffer (this rank's slices), the units moved onto it, the fp32 master and gradient
  // shard, the receive buffers.
  void allocate_shards();
  void create_optimizer();
  // Grad-accumulator hooks (a unit's gradients complete) and pre-backward callbacks per unit.
  void add_unit_hooks();
  // Installs run_unit() as the model's outermost unit wrapper (removed by the destructor).
  void install_unit_wrapper();

  at::Tensor run_unit(size_t u, const std::function<at::Tensor()>& body);
  void fetch(size_t u);  // gather u (waiting for a prefetch), record it, prefetch what follows
  void prefetch(size_t current);
  void start_gather(size_t u);
  void gather(size_t u);
  // Waits for u's gather and its cross-rank check (fetch_check.h); a swap buffer it read from
  // goes back.
  void finish_gather(size_t u);
  // Gathers an already gathered unit afresh (after an update), checked.
  void regather(size_t u);
  std::vector<std::string> unit_names() const;
  void release(size_t u);
  // The updated fp32 master of shard elements [lo, lo + n) into the parameters (cast): the slices
  // in RAM, or (offload_param nvme) staged per unit and written when the unit's slice is complete;
  // windows come in shard order.
  void publish_params(int64_t lo, int64_t n, const float* master);
  // The parameters of shard elements [lo, lo + n) as fp32 into `out` (reading swapped slices).
  void read_params(int64_t lo, int64_t n, float* out);
  // fn(unit, first element in the unit's slice, shard offset, length) for the units in [lo, lo+n).
  void for_units_in(int64_t lo, int64_t n,
                    const std::function<void(size_t, int64_t, int64_t, int64_t)>& fn) const;
  // After u's forward or backward: release it unless persistent or used again within
  // stage3_max_reuse_distance elements of the trace (and within stage3_max_live_parameters).
  void release_unless_reused(size_t u);
  bool reused_soon(size_t u) const;
  void before_unit_backward(size_t u);
  void on_grad_ready(size_t u);
  // Reduce-scatter the unit's gradients into its grad_shard_ slice and release the unit; with
  // overlap_comm the reduction runs on while backward goes on (at most two in flight).
  void reduce_unit(size_t u);
  struct Reduction {  // one unit's reduce-scatter in flight
    comm::Work work;
    at::Tensor grads;  // the unit's full gradients (the collective's input), freed on completion
    at::Tensor out;    // receive buffer when accumulating (added into slice), else the slice
    at::Tensor slice;
    int64_t ledger_bytes = 0;  // of the unit's gradient buffer
  };
  void finish_reduction();  // waits for the oldest reduction in flight and completes it

  sharding::ShardingPlan declared_;  // the model's own declaration (its UnitCalls)
  UnitPlan plan_;
  int wrapper_id_ = 0;  // of run_unit in the model's UnitCalls
  std::vector<std::unique_ptr<Stage3Unit>> units_;
  std::vector<bool> prebuilt_;  // partitioned while the model was built (zero.Init)
  std::vector<bool> persistent_;
  UnitTrace trace_;
  FetchCheck fetch_check_;             // every unit gather compared across ranks (fetch_check.h)
  std::vector<comm::Work> in_flight_;  // per unit: its gather, until waited for
  int64_t live_elements_ = 0;  // padded elements gathered or in flight, persistent units aside
  std::vector<int64_t> slice_offsets_;  // of each unit's slice in the shard buffers
  at::Tensor shard_;       // this rank's slices of every unit, in the parameters' dtype
  at::Tensor master_;      // fp32 master of the shard (the same tensor as shard_ in fp32)
  at::Tensor grad_shard_;  // fp32 reduced gradients of the shard, summed over micro-steps
  // Accumulation > 1: reduce-scatter outputs, added into grad_shard_ (two with overlap_comm).
  std::vector<at::Tensor> receive_;
  std::deque<Reduction> reducing_;  // in flight, oldest first
  size_t reductions_started_ = 0;   // picks the receive buffer
  std::unique_ptr<optim::FlatAdam> adam_;
  std::unique_ptr<comm::GradReduction> reduction_;
  std::unique_ptr<SwappedAdam> swapped_;  // offload_optimizer nvme
  bool master_swapped_ = false;           // SwappedAdam swaps the fp32 master too
  // offload_param nvme: the units whose slices live on NVMe, the swap files and buffers, and
  // per unit whether a swap buffer is the source of its gather in flight.
  std::unique_ptr<offload::PartitionSwapper> param_swapper_;
  std::vector<bool> swapped_param_, holding_buffer_;
  std::vector<at::Tensor> param_slice_;  // per unit: its slice in RAM (undefined when swapped)
  at::Tensor publish_stage_;             // one swapped unit's updated slice being assembled
  size_t publish_unit_ = 0;
  int64_t publish_filled_ = 0;
  at::Tensor staged_master_, staged_exp_avg_, staged_exp_avg_sq_;  // nvme checkpoints
  std::vector<std::function<void()>> pre_backward_;  // per unit, referenced by autograd nodes
  // Per backward: the unit's gradients still to arrive, and whether it was reduced.
  std::vector<size_t> pending_;
  std::vector<bool> reduced_;
  bool in_backward_ = false;
  bool holding_all_ = false;  // inside with_full_parameters()
  bool first_micro_step_ = true;
  // Strong references: autograd holds grad accumulators weakly, and the hooks live on them.
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
};

}  // namespace deepshard::zero
