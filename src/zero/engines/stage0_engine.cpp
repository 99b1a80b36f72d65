// Implementation of the stage-0 engine (see stage0_engine.h).
#include "zero/engines/stage0_engine.h"

#include <torch/torch.h>

#include "comm/powersgd.h"
#include "deepshard/util/error.h"
#include "zero/grad_compression.h"
#include "zero/grad_norm.h"
#include "zero/grad_ready_hooks.h"

namespace deepshard::zero {

Stage0Engine::Stage0Engine(std::shared_ptr<torch::nn::Module> model, const config::DsConfig& config,
                           comm::Group& group)
    : EngineBase(std::move(model), config, group) {
  flat_ = std::make_unique<FlatParams>(*model_, /*alignment=*/1);
  num_parameters_ = flat_->numel();
  const int64_t elem = flat_->params().element_size();
  ledger_.allocate(MemoryCategory::kParameters, flat_->padded_numel() * elem);
  ledger_.allocate(MemoryCategory::kGradients, flat_->padded_numel() * elem);

  // Every rank starts from rank 0's parameters, as DeepSpeed does.
  group_.broadcast(flat_->params(), 0);
  master_ = flat_->params();
  grads_fp32_ = flat_->grads();
  low_precision_params_ = master_.scalar_type() != at::kFloat;
  if (low_precision_params_) {
    torch::NoGradGuard no_grad;
    master_ = flat_->params().to(at::kFloat);
    grads_fp32_ = torch::zeros_like(master_);
    ledger_.allocate(MemoryCategory::kMasterWeights, master_.numel() * master_.element_size());
    ledger_.allocate(MemoryCategory::kGradients, grads_fp32_.numel() * grads_fp32_.element_size());
  }

  adam_ = std::make_unique<optim::FlatAdam>(config_.optimizer, flat_->padded_numel(),
                                            flat_->ranges(config_.optimizer.weight_decay));
  ledger_.allocate(MemoryCategory::kOptimizerState, 2 * flat_->padded_numel() * 4);

  std::vector<GradBuckets::Slot> slots;
  for (const auto& e : flat_->entries()) slots.push_back({e.offset, e.numel});
  const at::Tensor grads = grads_fp32_;
  reduction_ = make_grad_reduction(group_, config_);
  comm::GradReduction* reduction = reduction_.get();
  buckets_ = std::make_unique<GradBuckets>(
      slots, flat_->padded_numel(), config_.zero.reduce_bucket_size,
      [grads, reduction](int64_t offset, int64_t numel) {
        return reduction->all_reduce_mean_async(grads.narrow(0, offset, numel));
      });
  buckets_->set_completion([reduction](size_t) { reduction->complete_next(); });

  accumulators_ = add_grad_ready_hooks(flat_->entries(), *buckets_);
  compression_ = make_grad_compression(group_, config_, flat_->entries(), flat_->padded_numel());
  if (compression_) ledger_.allocate(MemoryCategory::kCommBuffers, compression_->buffer_bytes(4));
}

Stage0Engine::~Stage0Engine() = default;

void Stage0Engine::before_backward(bool boundary) {
  // Mixed precision reduces the fp32 buffer, complete only after backward; so does compression,
  // which needs the whole gradient.
  if (boundary && group_.size() > 1 && !low_precision_params_ && !compression_) buckets_->begin();
}

void Stage0Engine::after_backward(bool boundary) {
  if (low_precision_params_) flat_->accumulate_grads_into(grads_fp32_);
  if (!boundary || group_.size() == 1) return;
  if (compression_) {
    compression_->all_reduce_mean(grads_fp32_, global_steps());
    return;
  }
  if (low_precision_params_) buckets_->begin();
  buckets_->finish();
}

at::Tensor Stage0Engine::accumulated_grad(const std::string& name) {
  return flat_->view_of(grads_fp32_, name);
}

at::Tensor Stage0Engine::reduced_grads() { return grads_fp32_; }

double Stage0Engine::global_grad_norm(const at::Tensor& reduced) {
  // Gradients are replicated after the all-reduce: the global norm is local.
  return l2_norm(reduced);
}

std::vector<EngineBase::GradPiece> Stage0Engine::reduced_pieces() const {
  std::vector<GradPiece> pieces;
  for (const FlatParamEntry& e : flat_->entries())
    pieces.push_back({&e.name, e.offset, e.numel, 0});
  return pieces;
}

void Stage0Engine::update_parameters(const UpdateRates& rates, float grad_factor) {
  if (rates.beta1) adam_->set_beta1(*rates.beta1);
  if (rates.beta2) adam_->set_beta2(*rates.beta2);
  const at::Tensor& params = flat_->params();
  if (params.scalar_type() == at::kBFloat16) {
    adam_->step(master_, grads_fp32_, rates.lr, grad_factor, /*bf16_copy=*/params);
  } else {
    adam_->step(master_, grads_fp32_, rates.lr, grad_factor);
    if (!master_.is_same(params)) params.copy_(master_);
  }
}

void Stage0Engine::zero_grads() {
  flat_->zero_grads();
  if (!grads_fp32_.is_same(flat_->grads())) grads_fp32_.zero_();
}

std::vector<EngineBase::StatePiece> Stage0Engine::state_view(StateUse use) {
  // The state is replicated: loading fills all of it; saving splits every parameter evenly over
  // the ranks (each writes 1/N).
  const int64_t n = use == StateUse::kSave ? group_.size() : 1;
  const int64_t r = use == StateUse::kSave ? group_.rank() : 0;
  std::vector<StatePiece> out;
  for (const auto& e : flat_->entries()) {
    const int64_t begin = e.numel * r / n, end = e.numel * (r + 1) / n;
    if (begin == end) continue;
    const int64_t offset = e.offset + begin, count = end - begin;
    out.push_back({e.name, begin, end, master_.narrow(0, offset, count),
                   adam_->exp_avg().narrow(0, offset, count),
                   adam_->exp_avg_sq().narrow(0, offset, count)});
  }
  return out;
}

void Stage0Engine::publish_loaded_state() {
  const at::Tensor& params = flat_->params();
  if (!master_.is_same(params)) params.copy_(master_);
}

}  // namespace deepshard::zero
