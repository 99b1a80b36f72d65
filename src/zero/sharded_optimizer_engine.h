// ZeRO stages 1 and 2 (DeepSpeed's DeepSpeedZeroOptimizer, one class with a flag as there):
// parameters stay replicated; the optimizer state (fp32 master slices, Adam m and v) exists only
// for the elements this rank owns (ShardLayout: slice r of every bucket). Stage 1 accumulates the
// full gradient locally and reduce-scatters it bucket by bucket at the accumulation boundary;
// stage 2 reduce-scatters every micro-step and accumulates only the owned, reduced gradient
// shard. The step computes the global norm from the owned gradients, runs Adam on the shard and
// all-gathers the updated slices back into every rank's parameters. Mixed precision (bf16/fp16
// model): after every backward autograd's low-precision gradients are added into a full fp32
// accumulation buffer, which is what the buckets reduce-scatter (after backward, not from the
// hooks); the gradient shard is fp32.
#pragma once

#include <memory>
#include <vector>

#include "deepshard/optim/adam.h"
#include "deepshard/zero/engine.h"
#include "zero/flat_params.h"
#include "zero/grad_buckets.h"
#include "zero/shard_layout.h"

namespace torch::autograd {
struct Node;
}

namespace deepshard::zero {

class ShardedOptimizerEngine : public Engine {
 public:
  // `partition_grads`: stage 2 (keep only the reduced gradient shard across micro-steps).
  ShardedOptimizerEngine(std::shared_ptr<torch::nn::Module> model, const config::DsConfig& config,
                         comm::Group& group, bool partition_grads);
  ~ShardedOptimizerEngine() override;

 protected:
  void before_backward(bool boundary) override;
  void after_backward(bool boundary) override;
  at::Tensor reduced_grads() override;
  double global_grad_norm(const at::Tensor& reduced) override;
  void update_parameters(const UpdateRates& rates, float grad_factor) override;
  void zero_grads() override;

 private:
  comm::Work start_reduce_scatter(size_t bucket);
  void complete_reduce_scatter(size_t bucket);
  void all_gather_params();
  void allocate(MemoryCategory category, at::Tensor& buffer, int64_t numel,
                const at::TensorOptions& options);

  bool partition_grads_;
  std::unique_ptr<ShardLayout> layout_;
  std::unique_ptr<FlatParams> flat_;
  at::Tensor reduce_source_;  // what is reduce-scattered: fp32 accumulation buffer, or flat grads
  at::Tensor master_;         // fp32 copy of the owned parameter slices [shard_numel]
  at::Tensor grad_shard_;     // the reduced gradient of the owned elements [shard_numel]
  // Stage 2, accumulation > 1: receive buffers of the reduce-scatters after the window's first
  // micro-step (added into grad_shard_ on completion); two for overlap_comm, else one.
  std::vector<at::Tensor> receive_;
  bool first_micro_step_ = true;  // this backward is the first of its accumulation window
  std::unique_ptr<GradBuckets> buckets_;
  std::unique_ptr<optim::FlatAdam> adam_;
  // Strong references: autograd holds grad accumulators weakly, and the hooks live on them.
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
};

}  // namespace deepshard::zero
