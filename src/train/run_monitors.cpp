// Implementation of run_monitors.h.
#include "train/run_monitors.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "comm/comms_logger.h"
#include "deepshard/util/error.h"
#include "monitor/csv_monitor.h"
#include "monitor/tensorboard.h"
#include "train/training_run.h"
#include "util/log.h"
#include "util/stopwatch.h"

namespace deepshard::train {
namespace {

std::string log_dir(const config::MonitorSinkConfig& sink) {
  return (std::filesystem::path(sink.output_path) / sink.job_name).string();
}

comm::CommsLoggerOptions comms_options(const config::CommsLoggerConfig& c) {
  return {c.prof_all, c.prof_ops};
}

}  // namespace

std::vector<std::pair<std::string, double>> scalar_fields(const nlohmann::json& record) {
  std::vector<std::pair<std::string, double>> out;
  for (const auto& [key, value] : record.items()) {
    if (key == "step") continue;
    if (value.is_number() || value.is_boolean()) {
      out.push_back({key, value.is_boolean() ? double(value.get<bool>()) : value.get<double>()});
    } else if (value.is_object()) {  // "memory": {"parameters": ...} -> "memory/parameters"
      for (const auto& [k, v] : value.items())
        if (v.is_number()) out.push_back({key + "/" + k, v.get<double>()});
    }
  }
  return out;
}

std::string monitor_tag(const std::string& field) {
  if (field == "loss") return "Train/Samples/train_loss";
  return "Train/Samples/" + field;  // lr, loss_scale, val_loss, tokens_per_s, ...
}

RunMonitors::RunMonitors(const config::RunConfig& run, comm::Group& group)
    : run_(run),
      group_(group),
      rank0_(group.rank() == 0),
      steps_per_print_(run.ds.steps_per_print.value_or(10)) {
  const auto& m = run.ds.monitor;
  if (rank0_ && m.tensorboard.enabled) {
    auto tb = std::make_unique<monitor::TensorBoardMonitor>(log_dir(m.tensorboard));
    log::info("tensorboard: writing ", tb->path());
    sinks_.push_back(std::move(tb));
  }
  if (rank0_ && m.csv_monitor.enabled) {
    sinks_.push_back(std::make_unique<monitor::CsvMonitor>(log_dir(m.csv_monitor)));
    log::info("csv_monitor: writing ", log_dir(m.csv_monitor), "/*.csv");
  }
  if (run.ds.comms_logger.enabled) group.log().keep_detail(true);
}

RunMonitors::~RunMonitors() = default;

void RunMonitors::attach(const torch::nn::Module& model) {
  if (rank0_ && run_.ds.flops_profiler.enabled)
    profiler_ = std::make_unique<profiling::FlopsProfiler>(model);
}

void RunMonitors::before_forward(int64_t step, int64_t micro) {
  profiling_ = profiler_ && micro == 0 && step + 1 == run_.ds.flops_profiler.profile_step;
  if (profiling_) profiler_->start();
}

void RunMonitors::after_forward() {
  if (!profiling_) return;
  profiler_->stop();
  t0_ = Clock::now();
}

void RunMonitors::after_backward() {
  if (!profiling_) return;
  backward_s_ = util::seconds_since(t0_);
  t0_ = Clock::now();
}

void RunMonitors::after_micro_step() {
  if (!profiling_) return;
  step_s_ = util::seconds_since(t0_);
  profiling_ = false;
  const auto& fp = run_.ds.flops_profiler;
  profiling::ProfileContext ctx;
  ctx.profile_step = fp.profile_step;
  ctx.world_size = group_.size();
  ctx.micro_batch_size = run_.ds.train_micro_batch_size_per_gpu;
  ctx.backward_seconds = backward_s_;
  ctx.step_seconds = step_s_;
  profiling::ReportOptions options;
  options.module_depth = fp.module_depth;
  options.top_modules = fp.top_modules;
  options.detailed = fp.detailed;
  const std::string text = profiling::format_profile(*profiler_, ctx, options);
  if (fp.output_file && !fp.output_file->empty()) {
    const std::filesystem::path path(*fp.output_file);
    if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
    std::ofstream out(path);
    DS_CHECK(out.good(), IoError, "flops_profiler.output_file: cannot write ", path.string());
    out << text;
    log::info("flops profiler: profile of step ", fp.profile_step, " written to ", path.string());
  } else {
    std::printf("%s", text.c_str());
    std::fflush(stdout);
  }
}

void RunMonitors::on_step(int64_t step, nlohmann::json& record) {
  const double step_time = record.value("step_time_s", 0.0);
  if (step_time > 0) record["comm_wait_share"] = record.value("comm_wait_s", 0.0) / step_time;

  if (!sinks_.empty()) {
    const int64_t samples = (step + 1) * run_.ds.train_batch_size;
    std::vector<monitor::ScalarEvent> events;
    for (const auto& [field, value] : scalar_fields(record)) {
      if (field == "loss_scale" && !run_.ds.fp16.enabled) continue;  // DeepSpeed: fp16 only
      events.push_back({monitor_tag(field), value, samples});
    }
    for (auto& sink : sinks_) {
      sink->write_events(events);
      if ((step + 1) % steps_per_print_ == 0) sink->flush();
    }
  }
  if (run_.ds.comms_logger.enabled && run_.ds.comms_logger.verbose) {
    const comm::CommDetail now = group_.log().detail();
    if (rank0_) {
      std::printf("comms logger, step %lld:\n%s", static_cast<long long>(step + 1),
                  comm::format_comms_summary(comm::detail_since(now, comm_before_), group_.size(),
                                             comms_options(run_.ds.comms_logger))
                      .c_str());
      std::fflush(stdout);
    }
    comm_before_ = now;
  }
}

void RunMonitors::finish(nlohmann::json& summary) {
  for (auto& sink : sinks_) sink->flush();
  if (!run_.ds.comms_logger.enabled || !rank0_) return;
  const comm::CommDetail detail = group_.log().detail();
  std::printf("comms logger (rank 0, whole run):\n%s",
              comm::format_comms_summary(detail, group_.size(), comms_options(run_.ds.comms_logger))
                  .c_str());
  std::fflush(stdout);
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [op, sizes] : detail) {
    for (const auto& [size, s] : sizes) {
      double total = 0;
      for (double l : s.latencies) total += l;
      out[op][std::to_string(size)] = {{"count", s.count},
                                       {"bytes", s.bytes},
                                       {"total_latency_ms", total * 1e3},
                                       {"avg_latency_ms", comm::trim_mean(s.latencies) * 1e3}};
    }
  }
  summary["comms_logger"] = out;
}

namespace {

// The monitors as a step hook: the step's record to the monitors, comms logger tables,
// summary.json.
class MonitorsHook : public StepHook {
 public:
  void after_step(TrainingRun& run, StepRecord& step) override {
    run.monitors->on_step(step.step - 1, step.metrics);
  }
  void add_to_summary(const TrainingRun& run, nlohmann::json& out) const override {
    run.monitors->finish(out);
  }
};

}  // namespace

std::unique_ptr<StepHook> make_monitors_hook() { return std::make_unique<MonitorsHook>(); }

}  // namespace deepshard::train
