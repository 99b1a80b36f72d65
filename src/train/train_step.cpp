// The step of the training loop: one optimizer step (forward, backward and engine step for each
// micro-batch of the accumulation window), its loss and stop flag agreed by all ranks.
#include <torch/torch.h>

#include <cmath>
#include <vector>

#include "deepshard/util/error.h"
#include "train/stop_signals.h"
#include "train/training_run.h"
#include "util/fault_injection.h"

namespace deepshard::train {

namespace {

// The accumulation window's micro-steps on the whole model (or this rank's tensor slices): the
// mean loss of this rank's micro-batches.
double micro_steps(TrainingRun& run, int64_t step, StepRecord& r) {
  double loss_sum = 0.0;
  for (int64_t micro = 0; micro < run.ds.gradient_accumulation_steps; ++micro) {
    auto batch = run.data.sampler->batch(step, micro);
    run.monitors->before_forward(step, micro);
    auto t = Clock::now();
    auto loss =
        run.activations->forward([&] { return (*run.engine)(batch.inputs, batch.targets); });
    r.forward_s += seconds_since(t);
    run.monitors->after_forward();
    t = Clock::now();
    run.engine->backward(loss);
    r.backward_s += seconds_since(t);
    run.monitors->after_backward();
    t = Clock::now();
    r.result = run.engine->step();
    r.optimizer_s += seconds_since(t);
    run.monitors->after_micro_step();
    loss_sum += loss.item<double>();
  }
  return loss_sum / static_cast<double>(run.ds.gradient_accumulation_steps);
}

}  // namespace

StepRecord train_one_step(TrainingRun& run, int64_t step) {
  const auto& ds = run.ds;
  // Tests fail a rank here (testing::FaultInjection; nothing is installed outside tests).
  if (auto* faults = testing::fault_injection()) faults->at_train_step(step + 1, run.group.rank());
  const auto t0 = Clock::now();
  StepRecord r;
  const double loss = run.pipeline ? pipeline_step(run, step, r) : micro_steps(run, step, r);
  DS_ASSERT(r.result.boundary, "the accumulation window did not end with the step");
  r.step_time = seconds_since(t0);
  if (auto* faults = testing::fault_injection()) {
    faults->after_train_step(step + 1, run.group.rank(), r.result.skipped, r.result.loss_scale);
  }
  // The loss mean also tells every rank whether any rank was asked to stop (and, with a pipeline,
  // the mean share of the step spent waiting on it; without one the message stays 2 doubles).
  std::vector<double> message = {loss, stop_requested() ? 1.0 : 0.0};
  if (run.pipeline) message.push_back(run.pipeline->comm_wait_seconds() / r.step_time);
  auto shared = torch::tensor(message, torch::kDouble);
  run.group.all_reduce(shared, comm::ReduceOp::kAvg);
  r.loss = shared[0].item<double>();
  r.stop = shared[1].item<double>() > 0;
  if (run.pipeline) r.pipeline_wait_share = shared[2].item<double>();
  r.step = step + 1;
  r.first = step == run.start_step;
  r.last = r.step == run.config.train.steps;
  const double tokens_per_step =
      static_cast<double>(ds.train_batch_size) * static_cast<double>(run.config.model.block_size);
  r.tokens_per_s = tokens_per_step / r.step_time;
  DS_CHECK(std::isfinite(r.loss), Error, "step ", r.step, ": the training loss is ", r.loss);
  run.summary.final_loss = r.loss;
  run.summary.steps = r.step;
  r.metrics = {{"step", r.step},
               {"loss", r.loss},
               {"lr", r.result.lr},
               {"grad_norm", r.result.grad_norm},
               {"loss_scale", r.result.loss_scale},
               {"skipped", r.result.skipped},
               {"tokens_per_s", r.tokens_per_s},
               {"samples_per_s", static_cast<double>(ds.train_batch_size) / r.step_time},
               {"step_time_s", r.step_time}};
  return r;
}

}  // namespace deepshard::train
