// The monitoring of a training run besides metrics.jsonl, as DeepSpeed's config asks for it:
// tensorboard and csv_monitor (every numeric field of a step's record as a scalar under
// DeepSpeed's names, against global samples, rank 0, flushed every steps_per_print),
// comms_logger (DeepSpeed's table at the end, per step with verbose; its detail in summary.json)
// and flops_profiler (the forward of the first micro-batch of profile_step, rank 0).
#pragma once

#include <torch/nn/module.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <nlohmann/json.hpp>
#include <vector>

#include "deepshard/comm/comm_log.h"
#include "deepshard/comm/group.h"
#include "deepshard/config/run_config.h"
#include "monitor/monitor.h"
#include "profiling/flops_profiler.h"

namespace deepshard::train {

// The scalars of a metrics.jsonl record: numbers and booleans (as 0/1), and the numbers of a nested
// object as "object/key" ("memory/parameters"); "step" excluded.
std::vector<std::pair<std::string, double>> scalar_fields(const nlohmann::json& record);
// DeepSpeed's tag for a field ("loss" -> "Train/Samples/train_loss", else "Train/Samples/<field>").
std::string monitor_tag(const std::string& field);

class RunMonitors {
 public:
  // Before anything communicates: the comms logger counts from here.
  RunMonitors(const config::RunConfig& run, comm::Group& group);
  ~RunMonitors();
  // Once the model and its engine exist.
  void attach(const torch::nn::Module& model);

  // Around one micro-step of step `step` (0-based): the flops profiler's window and timings.
  void before_forward(int64_t step, int64_t micro);
  void after_forward();
  void after_backward();
  void after_micro_step();

  // Adds the comm wait share to the step's record, writes its scalars to the monitors (rank 0)
  // and prints the per-step comms table with verbose.
  void on_step(int64_t step, nlohmann::json& record);
  // The end: flushes, prints the comms logger's table, adds its detail to summary.json (rank 0).
  void finish(nlohmann::json& summary);

 private:
  using Clock = std::chrono::steady_clock;
  const config::RunConfig& run_;
  comm::Group& group_;
  bool rank0_;
  int64_t steps_per_print_;
  std::vector<std::unique_ptr<monitor::Monitor>> sinks_;
  std::unique_ptr<profiling::FlopsProfiler> profiler_;
  bool profiling_ = false;
  Clock::time_point t0_;
  double backward_s_ = -1, step_s_ = -1;
  comm::CommDetail comm_before_;
};

}  // namespace deepshard::train
