// The state one `deepshard train` run shares between its named steps, and the step functions
// themselves. run_training (trainer.cpp) calls them in order:
//   setup -> prepare_task -> build_model -> build_data -> build_engine -> resume -> step loop ->
//   finish
// where the step loop runs train_one_step and then every StepHook (throughput, memory profile,
// evaluation, progress, metrics file, checkpointing) in order. A new per-step concern (a monitor, a
// timing breakdown, a memory profile) is a StepHook in its own file, added to make_step_hooks.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/sampler.h"
#include "data/token_file.h"
#include "deepshard/comm/group.h"
#include "deepshard/config/run_config.h"
#include "deepshard/models/causal_lm.h"
#include "deepshard/train/trainer.h"
#include "deepshard/zero/engine.h"
#include "deepshard/zero/partitioned_build.h"
#include "models/tensor_parallel_model.h"
#include "models/tensor_slice_build.h"
#include "parallel/pipeline_engine.h"
#include "parallel/process_groups.h"
#include "train/activation_tracker.h"
#include "train/run_monitors.h"
#include "util/stopwatch.h"
#include "zero/estimator.h"

namespace deepshard::train {

using util::Clock;
using util::seconds_since;

// The token files and samplers of a run (valid_* null without data.valid); with a classification
// task the label files (prepare_task), whose passages the samplers draw from.
struct TrainData {
  std::unique_ptr<data::LabelFile> train_labels;
  std::unique_ptr<data::LabelFile> valid_labels;
  std::unique_ptr<data::TokenFile> train_file;
  std::unique_ptr<data::DistributedSampler> sampler;
  std::unique_ptr<data::TokenFile> valid_file;
  std::unique_ptr<data::DistributedSampler> valid_sampler;
};

struct TrainingRun {
  TrainingRun(const config::RunConfig& run, comm::Group& group)
      : config(run), ds(config.ds), group(group), rank0(group.rank() == 0), data_group(&group) {}

  // The run's config; prepare_task completes it (a classification task's label files and
  // model.num_labels), nothing else changes it.
  config::RunConfig config;
  const config::DsConfig& ds;
  comm::Group& group;  // the job's ranks
  const bool rank0;

  // build_parallel_groups (tensor_parallel_setup.cpp): with tensor_parallel.size > 1 or
  // pipeline.stages > 1 the rank grid's groups; data_group is the data-parallel axis (the
  // engine's group, zero.Init's, the samplers'), else the job's group. build_model: with
  // tensor_parallel.size > 1 the hook that split each block as it was built; build_tensor_parallel:
  // the model's tensor-parallel wrapper.
  std::unique_ptr<parallel::ParallelGroups> axes;
  comm::GroupOptions axis_options;  // of the axes' groups (and the pipeline's links)
  std::unique_ptr<models::TensorSliceBuild> tensor_build;
  std::unique_ptr<models::TensorParallelModel> tensor_parallel;
  comm::Group* data_group;
  // build_pipeline (pipeline_setup.cpp): with pipeline.stages > 1 this rank's links to the
  // neighbouring stages and the 1F1B engine over its stage of the model; else null.
  std::unique_ptr<parallel::PipeLinks> pipe_links;
  std::unique_ptr<parallel::PipelineEngine> pipeline;
  // With tensor_parallel.size > 1 too: the replica's tensor x pipeline ranks (the norm's group).
  std::unique_ptr<comm::Group> model_group;
  comm::Group& dp_group() { return *data_group; }
  // The mean loss of this rank's micro-batch: the model's, or the tensor-parallel one; with a
  // classification task the classifier's (targets: the classes [micro]).
  at::Tensor loss(const at::Tensor& inputs, const at::Tensor& targets);

  // build_model
  std::unique_ptr<zero::PartitionedBuild> zero_init;  // stage 3 zero.Init, else null
  std::shared_ptr<models::CausalLmImpl> model;        // model.arch's model
  // build_data
  TrainData data;
  // build_engine
  std::unique_ptr<zero::Engine> engine;
  zero::EstimateInput estimate_in;
  zero::ModelStateEstimate memory_estimate;
  // resume
  bool checkpointing = false;  // train.save_interval or train.checkpoint_dir set
  std::string checkpoint_dir;
  int64_t start_step = 0;  // optimizer steps already done (0 unless resumed)
  // Recompute (train.activation_checkpointing) and the activation meter, for the training loop.
  std::unique_ptr<ActivationTracker> activations;
  // tensorboard, csv_monitor, comms_logger, flops_profiler (run_monitors.h); made first.
  std::unique_ptr<RunMonitors> monitors;

  TrainSummary summary;
};

// One finished optimizer step as the hooks after it see it (every rank has the same values).
struct StepRecord {
  int64_t step = 0;    // 1-based number of the step just done
  bool first = false;  // the first step of this process (the warm-up step: not timed)
  bool last = false;   // step == train.steps
  double loss = 0.0;   // mean over ranks and micro-steps
  bool stop = false;   // a rank was asked to stop (signal)
  zero::StepResult result;
  double step_time = 0.0;  // seconds, this rank
  // This rank's wall time of the step's forward passes, backward passes and engine steps.
  double forward_s = 0.0, backward_s = 0.0, optimizer_s = 0.0;
  double tokens_per_s = 0.0;  // global batch tokens / step_time
  // With a pipeline: the share of the step every rank spent waiting on the pipeline's
  // communication (mean over the ranks).
  double pipeline_wait_share = 0.0;
  double val_loss = -1.0;  // set by the evaluation hook when it evaluated, else -1
  nlohmann::json metrics;  // the metrics.jsonl record; hooks add their fields
};

// Something done after every optimizer step (in make_step_hooks' order, on every rank: a hook
// may run collectives), and at the end of the run.
class StepHook {
 public:
  virtual ~StepHook() = default;
  virtual void after_step(TrainingRun& run, StepRecord& step) = 0;
  // After the loop (every rank): fill the TrainSummary fields this hook owns.
  virtual void finish(TrainingRun& run) {}
  // Rank 0, when summary.json is written: add this hook's fields.
  virtual void add_to_summary(const TrainingRun& run, nlohmann::json& out) const {}
};

// run_setup.cpp: checks data.train, creates the run folder, seeds this rank's generator.
void setup(TrainingRun& run);
// classification_task.cpp: with task.type "classification", the label files (defaults beside the
// token files) read, and model.num_labels set to their classes; else nothing.
void prepare_task(TrainingRun& run);
// classification_task.cpp: with a classification task, the accuracy of the classifier over every
// validation passage (the first model.block_size tokens of each, split over the data-parallel
// ranks) and its mean loss, with the majority-class baseline.
struct ClassificationScore {
  double loss = 0.0, accuracy = 0.0;
  // The share of validation passages whose class is the commonest of the training passages.
  double majority_baseline = 0.0;
  int64_t passages = 0;
};
ClassificationScore evaluate_classification(TrainingRun& run);
// tensor_parallel_setup.cpp: the rank grid's groups (tensor_parallel.size > 1 or pipeline.stages
// > 1; else nothing). Before build_model.
void build_parallel_groups(TrainingRun& run);
// model_build.cpp: the model (each block split over the tensor group as it is built, then
// partitioned under zero.Init at stage 3), init_from weights, training dtype.
void build_model(TrainingRun& run);
// tensor_parallel_setup.cpp: the model split over the tensor group (tensor_parallel.size > 1;
// else nothing).
void build_tensor_parallel(TrainingRun& run);
// tensor_parallel_setup.cpp: tells the engine about the tensor axis (its gradient norm).
void declare_model_parallel(TrainingRun& run);
// pipeline_setup.cpp: with pipeline.stages > 1, this rank's stage of the model (the other
// parameters released and frozen) and its pipeline engine; else nothing. Before build_engine.
void build_pipeline(TrainingRun& run);
// pipeline_setup.cpp: tells the engine about the pipeline axis (its gradient norm, the tied
// embedding's gradients summed before its reduction at the step).
void declare_pipeline(TrainingRun& run);
// pipeline_setup.cpp: the step's micro-batches through the 1F1B schedule, each backward through
// the engine, then the engine's boundary step (into r.result and the timings); the mean loss of
// this replica's micro-batches (every stage has it).
double pipeline_step(TrainingRun& run, int64_t step, StepRecord& r);
// train_data.cpp: token files and samplers.
void build_data(TrainingRun& run);
// engine_setup.cpp: the ZeRO engine, the memory estimate and report, the start banner.
void build_engine(TrainingRun& run);
// checkpointing.cpp: the engine's checkpoint layout (with a rank grid), the checkpoint folder;
// train.resume loads a checkpoint (sets start_step).
void resume(TrainingRun& run);
// train_step.cpp: one optimizer step (all micro-steps), the loss and stop flag agreed by all ranks.
StepRecord train_one_step(TrainingRun& run, int64_t step);
// throughput.cpp: a comm log's collectives by name: {op: {calls, bytes, seconds, wait_seconds}}.
nlohmann::json comm_ops_json(const comm::CommLog& log);
// The hooks, in the order they run after each step.
std::vector<std::unique_ptr<StepHook>> make_step_hooks(const TrainingRun& run);
std::unique_ptr<StepHook> make_throughput_hook(const TrainingRun& run);  // throughput.cpp
std::unique_ptr<StepHook> make_wall_clock_hook(const TrainingRun& run);  // wall_clock_hook.cpp
std::unique_ptr<StepHook> make_memory_profile_hook();                    // memory_profile_hook.cpp
std::unique_ptr<StepHook> make_evaluation_hook();                        // evaluation.cpp
std::unique_ptr<StepHook> make_progress_hook();                          // progress.cpp
std::unique_ptr<StepHook> make_metrics_file_hook(const TrainingRun& run);  // progress.cpp
std::unique_ptr<StepHook> make_checkpoint_hook();                          // checkpointing.cpp
std::unique_ptr<StepHook> make_monitors_hook();                            // run_monitors.cpp
std::unique_ptr<StepHook> make_pipeline_hook();                            // pipeline_setup.cpp
// run_summary.cpp: final weights, text sample, summary.json.
void finish_run(TrainingRun& run, const std::vector<std::unique_ptr<StepHook>>& hooks);

// Mean of a per-rank scalar over all ranks; a per-rank value gathered from all ranks.
double mean_over_ranks(comm::Group& group, double value);
std::vector<int64_t> gather_over_ranks(comm::Group& group, int64_t value);

}  // namespace deepshard::train
