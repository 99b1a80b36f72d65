// ZeRO stages 1 and 2 (DeepSpeed's DeepSpeedZeroOptimizer, one class with a flag as there):
// parameters stay replicated; the optimizer state (Adam m and v, and with a bf16/fp16 model the
// fp32 master slices) exists only for the elements this rank owns (ShardLayout: slice r of every
// bucket). With fp32 parameters the owned slices of the parameter buffer are the master weights
// (Adam updates them in place). Stage 1 accumulates the full gradient locally and reduces it
// bucket by bucket at the accumulation boundary; stage 2 has no full gradient buffer: each
// gradient is copied from autograd's .grad into a bucket-sized staging buffer (GradStaging, fp32)
// and released, every bucket is reduced on every micro-step while backward runs, and only the
// owned, reduced gradient shard is accumulated. The step computes the global norm from the owned
// gradients, runs Adam on the shard and all-gathers the updated slices back into every rank's
// parameters. Stage 1 with a bf16/fp16 model adds autograd's gradients into a full fp32
// accumulation buffer after every backward, which is what it reduces (after backward).
// offload_optimizer (ZeRO-Offload): `cpu` keeps the master and Adam state in host memory (the
// offload device; on a CPU compute device they are where they were: no copy) and the fused CPU
// Adam updates them; `nvme` swaps them per sub-group (SwappedAdam), the fp32 parameters staying
// their own master in the replicated parameter buffer.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "optim/adam.h"
#include "zero/engine_base.h"
#include "zero/flat_params.h"
#include "zero/grad_buckets.h"
#include "zero/grad_staging.h"
#include "zero/grad_wire.h"
#include "zero/shard_layout.h"
#include "zero/swapped_adam.h"

namespace torch::autograd {
struct Node;
}

namespace deepshard::zero {

class ShardedOptimizerEngine : public EngineBase {
 public:
  // `partition_grads`: stage 2 (keep only the reduced gradient shard across micro-steps).
  ShardedOptimizerEngine(std::shared_ptr<torch::nn::Module> model, const config::DsConfig& config,
                         comm::Group& group, bool partition_grads);
  ~ShardedOptimizerEngine() override;

  at::Tensor accumulated_grad(const std::string& name) override;

 protected:
  void before_backward(bool boundary) override;
  void after_backward(bool boundary) override;
  at::Tensor reduced_grads() override;
  double global_grad_norm(const at::Tensor& reduced) override;
  std::vector<GradPiece> reduced_pieces() const override;
  bool reduced_is_sharded() const override { return true; }
  void update_parameters(const UpdateRates& rates, float grad_factor) override;
  void zero_grads() override;
  void reduced_grads_changed() override;
  std::vector<StatePiece> state_view(StateUse use) override;
  optim::FlatAdam& optimizer() override { return *adam_; }
  void publish_loaded_state() override;

 private:
  void on_grad_ready(size_t slot);
  at::Tensor reduce_input(size_t bucket) const;  // the bucket's gradients being reduced
  comm::Work start_reduction(size_t bucket);
  void complete_reduction(size_t bucket);
  // Moves a reduced bucket's owned slice into the gradient shard (and host memory when offloaded).
  // `whole_bucket`: the whole bucket was all-reduced in place (reduce_scatter false, compression);
  // else the reduce-scatter wrote the shard (or the receive buffer, added here).
  void take_reduced(size_t bucket, bool whole_bucket);
  at::Tensor owned_params(size_t bucket) const;  // this rank's updated slice of a bucket
  void all_gather_params();
  // nvme: cast [lo, lo + n) of the updated fp32 master into the owned parameter slices.
  void publish_master(int64_t lo, int64_t n, const float* master);
  // nvme, checkpoints: the state read out of the swap files (save) or to be written (load).
  void stage_swapped_state(bool read);
  void allocate(MemoryCategory category, at::Tensor& buffer, int64_t numel,
                const at::TensorOptions& options, MemoryPlace place = MemoryPlace::kCompute);
  // fn(shard offset, flat offset, length) for the parts of shard window [lo, lo + n) in each
  // bucket's owned slice.
  void for_shard_window(int64_t lo, int64_t n,
                        const std::function<void(int64_t, int64_t, int64_t)>& fn) const;

  bool partition_grads_;
  std::unique_ptr<ShardLayout> layout_;
  std::unique_ptr<FlatParams> flat_;
  // Stage 1: what is reduced at the boundary (fp32 accumulation buffer, or the flat gradients).
  at::Tensor reduce_source_;
  std::unique_ptr<GradStaging> staging_;  // stage 2: the bucket-sized gradient buffers
  at::Tensor master_;      // bf16/fp16 model: fp32 copy of the owned parameter slices [shard_numel]
  at::Tensor grad_shard_;  // the reduced gradient of the owned elements [shard_numel], fp32
  // Stage 2, accumulation > 1, reduce_scatter: receive buffers of the reductions after the
  // window's first micro-step (added into grad_shard_ on completion); one per reduction in flight.
  std::vector<at::Tensor> receive_;
  bool first_micro_step_ = true;  // this backward is the first of its accumulation window
  std::unique_ptr<comm::GradReduction> reduction_;
  bool last_micro_step_ = false;  // this backward ends its accumulation window
  at::Tensor host_grads_;  // offload to another device than the compute device: the shard's grads
  std::unique_ptr<GradBuckets> buckets_;
  std::unique_ptr<optim::FlatAdam> adam_;
  std::unique_ptr<SwappedAdam> swapped_;                           // offload_optimizer nvme
  at::Tensor staged_master_, staged_exp_avg_, staged_exp_avg_sq_;  // nvme checkpoints
  // Strong references: autograd holds grad accumulators weakly, and the hooks live on them.
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
};

}  // namespace deepshard::zero
