// The stage-independent part of the engine: accumulation-window bookkeeping, the LR schedule, and
// the choice of implementation for the configured ZeRO stage.
#include "deepshard/zero/engine.h"

#include <torch/torch.h>

#include <cmath>
#include <cstdlib>
#include <limits>

#include "deepshard/config/loader.h"
#include "deepshard/optim/clip.h"
#include "deepshard/optim/lr_schedule.h"
#include "deepshard/util/error.h"
#include "deepshard/util/strings.h"
#include "zero/sharded_optimizer_engine.h"
#include "zero/stage0_engine.h"
#include "zero/stage3_engine.h"

namespace deepshard::zero {

std::unique_ptr<Engine> Engine::initialize(std::shared_ptr<torch::nn::Module> model,
                                           const config::DsConfig& config, comm::Group& group,
                                           PartitionedBuild* build) {
  DS_CHECK(model != nullptr, Error, "Engine::initialize: no model");
  auto unsupported = config::unsupported_features(config);
  if (!unsupported.empty()) {
    std::string message;
    for (const auto& u : unsupported) message += (message.empty() ? "" : "\n") + u;
    throw ConfigError(message);
  }
  DS_CHECK(
      config.train_micro_batch_size_per_gpu * config.gradient_accumulation_steps * group.size() ==
          config.train_batch_size,
      ConfigError, "train_batch_size: ", config.train_batch_size,
      " != ", config.train_micro_batch_size_per_gpu, " * ", config.gradient_accumulation_steps,
      " * ", group.size(), " (micro batch * accumulation steps * world size)");
  DS_CHECK(build == nullptr || config.zero.stage == 3, ConfigError,
           "a model built under zero.Init (partitioned blocks) needs zero_optimization.stage 3, "
           "not ",
           config.zero.stage);
  switch (config.zero.stage) {
    case 0:
      return std::make_unique<Stage0Engine>(std::move(model), config, group);
    case 1:
    case 2:
      return std::make_unique<ShardedOptimizerEngine>(std::move(model), config, group,
                                                      /*partition_grads=*/config.zero.stage == 2);
    case 3:
      return std::make_unique<Stage3Engine>(std::move(model), config, group, build);
    default:
      throw ConfigError("not supported yet: zero_optimization.stage=" +
                        std::to_string(config.zero.stage));
  }
}

Engine::Engine(std::shared_ptr<torch::nn::Module> model, const config::DsConfig& config,
               comm::Group& group)
    : model_(std::move(model)),
      config_(config),
      group_(group),
      scaler_(optim::LossScaler::from_config(config.fp16)) {
  schedule_ = optim::LrSchedule::create(config_.scheduler, config_.optimizer);
}

Engine::~Engine() = default;

bool Engine::is_gradient_accumulation_boundary() const {
  return (micro_steps_ + 1) % config_.gradient_accumulation_steps == 0;
}

double Engine::current_lr() const { return schedule_->lr(applied_steps_); }

void Engine::backward(const at::Tensor& loss) {
  DS_CHECK(loss.numel() == 1, Error, "backward: the loss must be a scalar, got shape ",
           loss.sizes());
  const bool boundary = is_gradient_accumulation_boundary();
  before_backward(boundary);
  try {
    const double scale = scaler_.scale();
    // fp32 and bf16 (scale 1) keep the unscaled expression: bit-for-bit as before.
    const at::Tensor scaled = scale == 1.0 ? loss : loss * scale;
    (scaled / static_cast<double>(config_.gradient_accumulation_steps)).backward();
  } catch (...) {
    after_backward(boundary);
    throw;
  }
  after_backward(boundary);
}

StepResult Engine::step() {
  StepResult result;
  result.boundary = is_gradient_accumulation_boundary();
  ++micro_steps_;
  if (!result.boundary) return result;
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

StepResult Engine::apply_update(const UpdateRates& rates) {
  StepResult result;
  torch::NoGradGuard no_grad;
  const at::Tensor grads = reduced_grads();
  maybe_inject_inf(grads);
  const double scaled_norm = global_grad_norm(grads);
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

bool Engine::overflow_on_any_rank(double global_norm) {
  // fp16 always; bf16 when bf16.check_grad_overflow (DeepSpeed's stage 1/2 default: true).
  if (!config_.fp16.enabled && !(config_.bf16.enabled && config_.bf16.check_grad_overflow)) {
    return false;
  }
  auto flag = torch::full({1}, std::isfinite(global_norm) ? 0.0f : 1.0f, torch::kFloat);
  group_.all_reduce(flag, comm::ReduceOp::kMax);  // Gloo has no bool reduction
  return flag.item<float>() > 0.0f;
}

void Engine::maybe_inject_inf(const at::Tensor& grads) const {
  static const char* at_step = std::getenv("DEEPSHARD_TEST_INF_AT_STEP");
  static const char* who = std::getenv("DEEPSHARD_TEST_INF_RANK");
  if (at_step == nullptr || std::atoll(at_step) != global_steps_ + 1) return;
  if ((who ? std::atoi(who) : 0) != group_.rank()) return;
  torch::NoGradGuard no_grad;
  grads.narrow(0, 0, 1).fill_(std::numeric_limits<float>::infinity());
}

}  // namespace deepshard::zero
