// Implementation of the stage-1/2 engine (see sharded_optimizer_engine.h).
#include "zero/sharded_optimizer_engine.h"

#include <torch/torch.h>

#include <cmath>

#include "deepshard/util/error.h"
#include "zero/grad_ready_hooks.h"

namespace deepshard::zero {

ShardedOptimizerEngine::ShardedOptimizerEngine(std::shared_ptr<torch::nn::Module> model,
                                               const config::DsConfig& config, comm::Group& group,
                                               bool partition_grads)
    : Engine(std::move(model), config, group), partition_grads_(partition_grads) {
  const int64_t bucket_numel = config_.zero.reduce_bucket_size;
  flat_ = std::make_unique<FlatParams>(*model_, [&](const std::vector<int64_t>& numels) {
    layout_ = std::make_unique<ShardLayout>(numels, bucket_numel, group_.size());
    return FlatParams::Placement{layout_->slot_offsets(), layout_->padded_numel()};
  });
  num_parameters_ = flat_->numel();
  const at::Tensor& params = flat_->params();
  const int64_t elem = params.element_size();
  ledger_.allocate(MemoryCategory::kParameters, flat_->padded_numel() * elem);
  // The full gradient buffer stays allocated in both stages: autograd accumulates into it.
  ledger_.allocate(MemoryCategory::kGradients, flat_->padded_numel() * elem);

  // Every rank starts from rank 0's parameters, as DeepSpeed does.
  group_.broadcast(params, 0);

  const int64_t shard = layout_->shard_numel();
  const auto& buckets = layout_->buckets();
  allocate(MemoryCategory::kMasterWeights, master_, shard, params.options().dtype(at::kFloat));
  reduce_source_ = flat_->grads();
  low_precision_params_ = params.scalar_type() != at::kFloat;
  if (low_precision_params_) {
    allocate(MemoryCategory::kGradients, reduce_source_, flat_->padded_numel(),
             params.options().dtype(at::kFloat));
  }
  allocate(MemoryCategory::kGradients, grad_shard_, shard, reduce_source_.options());
  {
    torch::NoGradGuard no_grad;
    for (size_t b = 0; b < buckets.size(); ++b) {
      master_.narrow(0, buckets[b].shard_offset, buckets[b].shard_numel)
          .copy_(params.narrow(0, layout_->owned_offset(b, group_.rank()), buckets[b].shard_numel));
    }
  }
  if (partition_grads_ && config_.gradient_accumulation_steps > 1) {
    int64_t largest = 0;
    for (const auto& b : buckets) largest = std::max(largest, b.shard_numel);
    receive_.resize(config_.zero.overlap_comm ? 2 : 1);
    for (auto& r : receive_)
      allocate(MemoryCategory::kCommBuffers, r, largest, grad_shard_.options());
  }

  std::vector<double> decay;
  for (const auto& e : flat_->entries())
    decay.push_back(e.decay ? config_.optimizer.weight_decay : 0.0);
  adam_ = std::make_unique<optim::FlatAdam>(config_.optimizer, shard,
                                            layout_->shard_ranges(group_.rank(), decay));
  ledger_.allocate(MemoryCategory::kOptimizerState, 2 * shard * 4);

  std::vector<GradBuckets::Slot> ranges;
  std::vector<size_t> bucket_of_slot;
  for (size_t b = 0; b < buckets.size(); ++b) {
    ranges.push_back({buckets[b].offset, buckets[b].numel});
    bucket_of_slot.insert(bucket_of_slot.end(), buckets[b].num_slots, b);
  }
  buckets_ = std::make_unique<GradBuckets>(ranges, bucket_of_slot, [this](int64_t offset, int64_t) {
    return start_reduce_scatter(layout_->bucket_at(offset));
  });
  buckets_->set_completion([this](size_t b) { complete_reduce_scatter(b); });
  // Without overlap_comm a reduction completes before the next starts (DeepSpeed reduces
  // synchronously then); with it, two may be in flight (its double-buffered IPG bucket).
  buckets_->set_max_in_flight(config_.zero.overlap_comm ? 2 : 1);
  accumulators_ = add_grad_ready_hooks(flat_->entries(), *buckets_);
}

ShardedOptimizerEngine::~ShardedOptimizerEngine() = default;

void ShardedOptimizerEngine::allocate(MemoryCategory category, at::Tensor& buffer, int64_t numel,
                                      const at::TensorOptions& options) {
  buffer = at::zeros({numel}, options);
  ledger_.allocate(category, numel * buffer.element_size());
}

void ShardedOptimizerEngine::before_backward(bool boundary) {
  first_micro_step_ = micro_steps() % config_.gradient_accumulation_steps == 0;
  // Mixed precision reduces the fp32 buffer, complete only after backward.
  if ((partition_grads_ || boundary) && !low_precision_params_) buckets_->begin();
}

void ShardedOptimizerEngine::after_backward(bool boundary) {
  if (low_precision_params_) {
    flat_->accumulate_grads_into(reduce_source_);
    if (partition_grads_ || boundary) buckets_->begin();
  }
  buckets_->finish();
}

comm::Work ShardedOptimizerEngine::start_reduce_scatter(size_t bucket) {
  const ShardBucket& b = layout_->buckets()[bucket];
  // Stage 1 reduces once per window and stage 2's first micro-step starts the sum: straight into
  // the shard. Later stage-2 micro-steps receive aside and add on completion.
  const bool into_shard = !partition_grads_ || first_micro_step_;
  const at::Tensor out = into_shard
                             ? grad_shard_.narrow(0, b.shard_offset, b.shard_numel)
                             : receive_[bucket % receive_.size()].narrow(0, 0, b.shard_numel);
  return group_.reduce_scatter_async(out, reduce_source_.narrow(0, b.offset, b.numel),
                                     comm::ReduceOp::kAvg);
}

void ShardedOptimizerEngine::complete_reduce_scatter(size_t bucket) {
  if (!partition_grads_) return;
  torch::NoGradGuard no_grad;
  const ShardBucket& b = layout_->buckets()[bucket];
  if (!first_micro_step_) {
    grad_shard_.narrow(0, b.shard_offset, b.shard_numel)
        .add_(receive_[bucket % receive_.size()].narrow(0, 0, b.shard_numel));
  }
  // The full gradient of this bucket is consumed: the next micro-step accumulates from zero.
  reduce_source_.narrow(0, b.offset, b.numel).zero_();
}

void ShardedOptimizerEngine::all_gather_params() {
  const at::Tensor& params = flat_->params();
  const auto& buckets = layout_->buckets();
  std::vector<comm::Work> works;
  works.reserve(buckets.size());
  for (const auto& b : buckets) {
    at::Tensor slice = master_.narrow(0, b.shard_offset, b.shard_numel);
    if (slice.scalar_type() != params.scalar_type()) slice = slice.to(params.scalar_type());
    works.push_back(group_.all_gather_async(params.narrow(0, b.offset, b.numel), slice));
  }
  for (auto& w : works) w.wait();
}

at::Tensor ShardedOptimizerEngine::reduced_grads() { return grad_shard_; }

double ShardedOptimizerEngine::global_grad_norm(const at::Tensor& reduced) {
  // Every element is owned by one rank (padding is zero): the global norm is the root of the sum
  // of the ranks' squared shard norms.
  at::Tensor squares = at::linalg_vector_norm(reduced, 2, {}, false, at::kDouble).square();
  squares = squares.reshape({1});
  group_.all_reduce(squares, comm::ReduceOp::kSum);
  return std::sqrt(squares.item<double>());
}

void ShardedOptimizerEngine::update_parameters(const UpdateRates& rates, float grad_factor) {
  if (rates.beta1) adam_->set_beta1(*rates.beta1);
  if (rates.beta2) adam_->set_beta2(*rates.beta2);
  adam_->step(master_, grad_shard_, rates.lr, grad_factor);
  all_gather_params();
}

void ShardedOptimizerEngine::zero_grads() {
  // Stage 2 zeroed each bucket of the full buffer after its reduction; the shard is
  // reduce-scattered into afresh (overwritten) by the window's first micro-step.
  if (!partition_grads_) reduce_source_.zero_();
}

}  // namespace deepshard::zero
