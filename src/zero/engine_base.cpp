// EngineBase (see engine_base.h): accumulation-window bookkeeping, the LR schedule, the update at
// the boundary; the dtype contract and module state at construction.
#include "zero/engine_base.h"

#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "comm/powersgd.h"
#include "optim/clip.h"
#include "optim/lr_schedule.h"
#include "deepshard/util/error.h"
#include "util/fault_injection.h"
#include "zero/grad_norm.h"
#include "zero/dtype_contract.h"

namespace deepshard::zero {

EngineBase::EngineBase(std::shared_ptr<torch::nn::Module> model, const config::DsConfig& config,
                       comm::Group& group)
    : model_(std::move(model)),
      config_(config),
      group_(group),
      scaler_(optim::LossScaler::from_config(config.fp16)) {
  schedule_ = optim::LrSchedule::create(config_.scheduler, config_.optimizer);
  apply_dtype_contract(*model_, config_, /*warn=*/group_.rank() == 0);
  // Buffers and frozen parameters start as rank 0's, as the parameters do.
  module_state_ = ModuleState(*model_);
  module_state_.broadcast(group_);
}

EngineBase::~EngineBase() = default;

bool EngineBase::is_gradient_accumulation_boundary() const {
  return (micro_steps_ + 1) % config_.gradient_accumulation_steps == 0;
}

double EngineBase::current_lr() const { return schedule_->lr(applied_steps_); }

void EngineBase::backward(const at::Tensor& loss) {
  DS_CHECK(loss.numel() == 1, Error, "backward: the loss must be a scalar, got shape ",
           loss.sizes());
  run_backward([&] {
    const double scale = scaler_.scale();
    // fp32 and bf16 (scale 1) keep the unscaled expression: bit-for-bit as before.
    const at::Tensor scaled = scale == 1.0 ? loss : loss * scale;
    (scaled / static_cast<double>(config_.gradient_accumulation_steps)).backward();
  });
}

void EngineBase::backward(const at::Tensor& output, const at::Tensor& grad) {
  DS_CHECK(grad.sizes() == output.sizes(), Error, "backward: a gradient of shape ", grad.sizes(),
           " for an output of shape ", output.sizes());
  run_backward([&] { output.backward(grad); });
}

void EngineBase::run_backward(const std::function<void()>& run) {
  // reduce_at_step: no reduction during the backward; the boundary step() runs it.
  const bool boundary = is_gradient_accumulation_boundary() && !before_reduction_;
  before_backward(boundary);
  try {
    run();
  } catch (...) {
    after_backward(boundary);
    throw;
  }
  after_backward(boundary);
}

void EngineBase::reduce_at_step(std::function<void()> before_reduction) {
  DS_CHECK(before_reduction != nullptr, Error, "reduce_at_step: no function");
  DS_CHECK(config_.zero.stage <= 1, Error,
           "reduce_at_step at zero_optimization.stage=", config_.zero.stage,
           ": stages 2 and 3 reduce during each backward (after_reduction)");
  DS_CHECK(micro_steps_ == 0, Error, "reduce_at_step after the first backward");
  before_reduction_ = std::move(before_reduction);
}

void EngineBase::after_reduction(std::function<void()> fn) {
  DS_CHECK(fn != nullptr, Error, "after_reduction: no function");
  DS_CHECK(micro_steps_ == 0, Error, "after_reduction after the first backward");
  after_reduction_ = std::move(fn);
}

at::Tensor EngineBase::reduced_grad(const std::string& name) {
  torch::NoGradGuard no_grad;
  const auto params = model_->named_parameters();
  const at::Tensor* param = params.find(name);
  DS_CHECK(param != nullptr, Error, "reduced_grad: the model has no parameter ", name);
  const at::Tensor reduced = reduced_grads();
  at::Tensor whole = at::zeros({param->numel()}, reduced.options());
  bool found = false;
  for (const GradPiece& piece : reduced_pieces()) {
    if (*piece.name != name) continue;
    whole.narrow(0, piece.param_offset, piece.numel)
        .copy_(reduced.narrow(0, piece.offset, piece.numel));
    found = true;
  }
  // A rank of a sharded group may hold none of it; a replicated one holds it whole.
  DS_CHECK(found || reduced_is_sharded(), Error, "reduced_grad: ", name, " is not trainable");
  if (reduced_is_sharded() && group_.size() > 1) group_.all_reduce(whole, comm::ReduceOp::kSum);
  return whole.view(param->sizes());
}

void EngineBase::set_reduced_grad(const std::string& name, const at::Tensor& whole) {
  torch::NoGradGuard no_grad;
  const at::Tensor flat = whole.reshape({-1});
  const at::Tensor reduced = reduced_grads();
  for (const GradPiece& piece : reduced_pieces()) {
    if (*piece.name != name) continue;
    DS_CHECK(piece.param_offset + piece.numel <= flat.numel(), Error,
             "set_reduced_grad: ", flat.numel(), " elements for ", name, ", which has more");
    reduced.narrow(0, piece.offset, piece.numel)
        .copy_(flat.narrow(0, piece.param_offset, piece.numel));
  }
  reduced_grads_changed();
}

at::Tensor EngineBase::accumulated_grad(const std::string& name) {
  throw Error("accumulated_grad(" + name + "): ZeRO stage " + std::to_string(config_.zero.stage) +
              " has no whole accumulation buffer (stages 0 and 1 only)");
}

StepResult EngineBase::step() {
  StepResult result;
  result.boundary = is_gradient_accumulation_boundary();
  ++micro_steps_;
  if (!result.boundary) return result;
  if (before_reduction_) {
    before_reduction_();
    // The window's reduction, as the hooks of a boundary backward with no gradient left to come.
    before_backward(true);
    after_backward(true);
  }
  if (after_reduction_) after_reduction_();
  const double lr = current_lr();
  const double scale = scaler_.scale();
  result =
      apply_update({lr, schedule_->beta1(applied_steps_), schedule_->beta2(applied_steps_), scale});
  result.boundary = true;
  result.lr = lr;
  result.loss_scale = scale;
  // Every boundary, skipped or not (a fixed scaler ignores it); DeepSpeed logs on rank 0.
  scaler_.update_scale(result.skipped, group_.rank() == 0);
  ++global_steps_;
  if (result.skipped) {
    ++skipped_steps_;
  } else {
    ++applied_steps_;
  }
  return result;
}

StepResult EngineBase::apply_update(const UpdateRates& rates) {
  StepResult result;
  torch::NoGradGuard no_grad;
  const at::Tensor grads = reduced_grads();
  if (auto* faults = testing::fault_injection();
      faults && faults->gradient_overflow(global_steps_ + 1, group_.rank()))
    grads.narrow(0, 0, 1).fill_(std::numeric_limits<float>::infinity());
  const double scaled_norm =
      model_parallel_.group ? model_parallel_grad_norm(grads) : global_grad_norm(grads);
  result.grad_norm = scaled_norm / rates.loss_scale;
  if (overflow_on_any_rank(scaled_norm)) {
    zero_grads();
    result.skipped = true;
    return result;
  }
  update_parameters(rates, optim::unscale_and_clip_factor(scaled_norm, rates.loss_scale,
                                                          config_.gradient_clipping));
  zero_grads();
  result.applied = true;
  return result;
}

std::vector<EngineBase::GradPiece> EngineBase::reduced_pieces() const {
  throw ConfigError("not supported yet: model parallelism (tensor_parallel.size > 1) with "
                    "zero_optimization.stage=" +
                    std::to_string(config_.zero.stage));
}

void EngineBase::set_model_parallel(ModelParallelAxis axis) {
  DS_CHECK(axis.group != nullptr && (axis.replicated || axis.counted), Error,
           "set_model_parallel: no group, or neither replicated() nor counted()");
  reduced_pieces();  // refuses the stages without it
  model_parallel_ = std::move(axis);
}

double EngineBase::model_parallel_grad_norm(const at::Tensor& reduced) {
  // Squares of the split parameters' pieces on every rank of the axis, of the replicated ones on
  // its rank 0 only (they are equal on all of them); summed over the data group when the
  // gradients are sharded over it, then over the axis.
  const bool count_replicated = model_parallel_.group->rank() == 0;
  const auto counted = [&](const std::string& name) {
    if (model_parallel_.counted) return model_parallel_.counted(name);
    return count_replicated || !model_parallel_.replicated(name);
  };
  // With the overflow check, the pieces not counted are summed too (element 1, in the same
  // all-reduces): an inf in a copy that only this rank holds (a replicated parameter on tensor
  // rank 1, the last stage's tied embedding) must skip the step on every rank of every axis, as
  // Megatron checks every local gradient, not only the norm's.
  const bool check = checks_overflow();
  at::Tensor sums = at::zeros({check ? 2 : 1}, reduced.options().dtype(at::kDouble));
  for (const GradPiece& piece : reduced_pieces()) {
    if (piece.numel == 0) continue;
    const bool add = counted(*piece.name);
    if (!add && !check) continue;
    sums.narrow(0, add ? 0 : 1, 1)
        .add_(squared_l2_norm(reduced.narrow(0, piece.offset, piece.numel)));
  }
  if (reduced_is_sharded() && group_.size() > 1) group_.all_reduce(sums, comm::ReduceOp::kSum);
  if (model_parallel_.group->size() > 1)
    model_parallel_.group->all_reduce(sums, comm::ReduceOp::kSum);
  if (check && !std::isfinite(sums[1].item<double>()))
    return std::numeric_limits<double>::infinity();
  return std::sqrt(sums[0].item<double>());
}

bool EngineBase::checks_overflow() const {
  // fp16 always; bf16 when bf16.check_grad_overflow (DeepSpeed's stage 1/2 default: true).
  return config_.fp16.enabled || (config_.bf16.enabled && config_.bf16.check_grad_overflow);
}

bool EngineBase::overflow_on_any_rank(double global_norm) {
  if (!checks_overflow()) return false;
  auto flag = torch::full({1}, std::isfinite(global_norm) ? 0.0f : 1.0f, torch::kFloat);
  group_.all_reduce(flag, comm::ReduceOp::kMax);  // Gloo has no bool reduction
  return flag.item<float>() > 0.0f;
}

}  // namespace deepshard::zero
