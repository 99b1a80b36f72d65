// Stage 0 (plain data parallelism, DeepSpeed's "ZeRO disabled"): every rank holds the full
// parameters, gradients and optimizer state. Gradients live in one flat buffer and are averaged
// across ranks in buckets of reduce_bucket_size elements, each started from the gradient
// accumulator hooks while backward still runs, and only at the accumulation boundary.
#pragma once

#include <memory>
#include <vector>

#include "optim/adam.h"
#include "zero/engine_base.h"
#include "zero/flat_params.h"
#include "zero/grad_buckets.h"
#include "zero/grad_wire.h"

namespace torch::autograd {
struct Node;
}

namespace deepshard::zero {

class Stage0Engine : public EngineBase {
 public:
  Stage0Engine(std::shared_ptr<torch::nn::Module> model, const config::DsConfig& config,
               comm::Group& group);
  ~Stage0Engine() override;

  at::Tensor accumulated_grad(const std::string& name) override;

 protected:
  void before_backward(bool boundary) override;
  void after_backward(bool boundary) override;
  at::Tensor reduced_grads() override;
  double global_grad_norm(const at::Tensor& reduced) override;
  std::vector<GradPiece> reduced_pieces() const override;
  bool reduced_is_sharded() const override { return false; }
  void update_parameters(const UpdateRates& rates, float grad_factor) override;
  void zero_grads() override;
  std::vector<StatePiece> state_view(StateUse use) override;
  optim::FlatAdam& optimizer() override { return *adam_; }
  void publish_loaded_state() override;

 private:
  std::unique_ptr<FlatParams> flat_;
  at::Tensor master_;      // the parameters Adam updates: fp32 master copy, or flat_->params()
  at::Tensor grads_fp32_;  // the gradients reduced and fed to Adam: fp32 buffer, or flat_->grads()
  std::unique_ptr<comm::GradReduction> reduction_;
  std::unique_ptr<GradBuckets> buckets_;
  std::unique_ptr<optim::FlatAdam> adam_;
  // Strong references: autograd holds grad accumulators weakly, and the hooks live on them.
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
};

}  // namespace deepshard::zero
