// run_training: the named steps of a training run in order (training_run.h lists them and the
// files that own them).
#include "deepshard/train/trainer.h"

#include "deepshard/config/loader.h"
#include "train/stop_signals.h"
#include "train/training_run.h"

namespace deepshard::train {

std::vector<std::unique_ptr<StepHook>> make_step_hooks(const TrainingRun& run) {
  std::vector<std::unique_ptr<StepHook>> hooks;
  hooks.push_back(make_throughput_hook(run));  // first: its comm snapshot closes the step
  hooks.push_back(make_wall_clock_hook(run));  // after throughput: reads the step's comm wait
  hooks.push_back(make_memory_profile_hook());
  hooks.push_back(make_evaluation_hook());
  hooks.push_back(make_pipeline_hook());  // before progress and metrics: adds its fields
  hooks.push_back(make_progress_hook());
  hooks.push_back(make_monitors_hook());  // before the metrics file: adds comm_wait_share
  hooks.push_back(make_metrics_file_hook(run));
  hooks.push_back(make_checkpoint_hook());  // last: saves what the step left
  return hooks;
}

TrainSummary run_training(const config::RunConfig& config, comm::Group& group) {
  // What the run refuses (not supported yet, naming the key), before anything is built or any
  // group made; `deepshard train` checks it before the rendezvous too.
  config::check_supported(config.ds);
  TrainingRun run(config, group);
  run.monitors = std::make_unique<RunMonitors>(config, group);  // the comms logger counts from here
  setup(run);
  prepare_task(run);
  build_parallel_groups(run);
  build_model(run);
  build_tensor_parallel(run);
  build_pipeline(run);
  build_data(run);
  build_engine(run);
  declare_model_parallel(run);
  declare_pipeline(run);
  run.monitors->attach(*run.model);
  resume(run);

  StopSignals stop_signals(run.checkpointing);
  run.activations = std::make_unique<ActivationTracker>(
      config, run.rank0, run.axes ? run.axes->tensor.get() : nullptr);
  auto hooks = make_step_hooks(run);
  for (int64_t step = run.start_step; step < config.train.steps; ++step) {
    StepRecord record = train_one_step(run, step);
    for (auto& hook : hooks) hook->after_step(run, record);
    if (record.stop) {
      run.summary.stopped = true;
      break;
    }
  }
  for (auto& hook : hooks) hook->finish(run);
  finish_run(run, hooks);
  return run.summary;
}

}  // namespace deepshard::train
