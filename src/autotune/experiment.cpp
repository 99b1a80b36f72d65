// Experiment and ExperimentResult (experiment.h): names, ranking and their JSON rows.
#include "autotune/experiment.h"

#include "deepshard/util/error.h"

namespace deepshard::autotune {

const char* to_string(TrialStatus status) {
  switch (status) {
    case TrialStatus::kRan:
      return "ran";
    case TrialStatus::kOutOfMemory:
      return "out of memory";
    case TrialStatus::kPruned:
      return "pruned";
    case TrialStatus::kFailed:
      return "failed";
  }
  return "failed";
}

TrialStatus trial_status_from(const std::string& text) {
  for (TrialStatus s :
       {TrialStatus::kRan, TrialStatus::kOutOfMemory, TrialStatus::kPruned, TrialStatus::kFailed}) {
    if (text == to_string(s)) return s;
  }
  throw Error("unknown experiment status '" + text + "'");
}

double metric_value(const ExperimentResult& r, const std::string& metric) {
  if (metric == "latency") return r.latency_ms;
  if (metric == "FLOPS") return r.flops;
  return r.throughput;
}

// Latency ranks lowest first (DeepSpeed's model-based tuner sorts it so; its grid search compares
// every metric as higher-is-better, which would pick the slowest configuration).
bool better(double a, double b, const std::string& metric) {
  return metric == "latency" ? a < b : a > b;
}

nlohmann::json to_json(const Experiment& e) {
  nlohmann::json overrides = nlohmann::json::object();
  for (const auto& [k, v] : e.overrides) overrides[k] = v;
  return {{"name", e.name},
          {"space", e.space},
          {"overrides", overrides},
          {"stage", e.stage},
          {"train_micro_batch_size_per_gpu", e.micro_batch},
          {"gradient_accumulation_steps", e.accumulation},
          {"train_batch_size", e.train_batch}};
}

Experiment experiment_from_json(const nlohmann::json& j) {
  Experiment e;
  e.name = j.at("name").get<std::string>();
  e.space = j.at("space").get<std::string>();
  for (const auto& [k, v] : j.at("overrides").items()) e.overrides[k] = v;
  e.stage = j.at("stage").get<int>();
  e.micro_batch = j.at("train_micro_batch_size_per_gpu").get<int64_t>();
  e.accumulation = j.at("gradient_accumulation_steps").get<int64_t>();
  e.train_batch = j.at("train_batch_size").get<int64_t>();
  return e;
}

nlohmann::json to_json(const ExperimentResult& r) {
  return {{"status", to_string(r.status)},
          {"reason", r.reason},
          {"latency", r.latency_ms},
          {"throughput", r.throughput},
          {"FLOPS_per_gpu", r.flops},
          {"compute_s", r.compute_s},
          {"comm_wait_s", r.comm_wait_s},
          {"comm_bytes", r.comm_bytes},
          {"peak_rss_bytes", r.peak_rss},
          {"memory_estimate_bytes", r.memory_estimate},
          {"wall_s", r.wall_s}};
}

ExperimentResult result_from_json(const nlohmann::json& j) {
  ExperimentResult r;
  r.status = trial_status_from(j.at("status").get<std::string>());
  r.reason = j.value("reason", "");
  r.latency_ms = j.value("latency", 0.0);
  r.throughput = j.value("throughput", 0.0);
  r.flops = j.value("FLOPS_per_gpu", 0.0);
  r.compute_s = j.value("compute_s", 0.0);
  r.comm_wait_s = j.value("comm_wait_s", 0.0);
  r.comm_bytes = j.value("comm_bytes", 0.0);
  r.peak_rss = j.value("peak_rss_bytes", int64_t{0});
  r.memory_estimate = j.value("memory_estimate_bytes", int64_t{0});
  r.wall_s = j.value("wall_s", 0.0);
  return r;
}

}  // namespace deepshard::autotune
