// ResultsStore (results_store.h).
#include "autotune/results_store.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "deepshard/util/error.h"

namespace deepshard::autotune {
namespace fs = std::filesystem;

void write_text_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    DS_CHECK(out.good(), IoError, tmp, ": cannot open for writing");
    out << text;
    out.close();
    DS_CHECK(out.good(), IoError, tmp, ": write failed");
  }
  fs::rename(tmp, path);
}

nlohmann::json deepspeed_keys(const nlohmann::json& run_config) {
  nlohmann::json out = run_config;
  for (const char* key : {"model", "data", "task", "train", "comm", "autotuning"}) out.erase(key);
  return out;
}

nlohmann::json row_json(const Row& r) {
  nlohmann::json diff = nlohmann::json::object();
  for (const auto& [k, v] : r.config_diff) diff[k] = v;
  nlohmann::json line = to_json(r.result);
  line["name"] = r.experiment.name;
  line["space"] = r.experiment.space;
  line["stage"] = r.experiment.stage;
  line["train_micro_batch_size_per_gpu"] = r.experiment.micro_batch;
  line["gradient_accumulation_steps"] = r.experiment.accumulation;
  line["train_batch_size"] = r.experiment.train_batch;
  line["config_diff"] = diff;
  line["reused"] = r.result.reused;
  return line;
}

ResultsStore::ResultsStore(std::string results_dir, std::string exps_dir, bool overwrite)
    : results_dir_(std::move(results_dir)), exps_dir_(std::move(exps_dir)) {
  if (overwrite) {
    fs::remove_all(results_dir_);
    fs::remove_all(exps_dir_);
  }
  fs::create_directories(results_dir_);
  fs::create_directories(exps_dir_);
}

std::string ResultsStore::experiment_dir(const std::string& name) const {
  return (fs::path(results_dir_) / name).string();
}

std::optional<ExperimentResult> ResultsStore::finished(const Experiment& e) const {
  const fs::path dir = experiment_dir(e.name);
  std::ifstream exp(dir / "exp.json"), result(dir / "result.json");
  if (!exp.good() || !result.good()) return std::nullopt;
  try {
    const Experiment earlier = experiment_from_json(nlohmann::json::parse(exp));
    if (earlier.overrides != e.overrides) return std::nullopt;
    ExperimentResult r = result_from_json(nlohmann::json::parse(result));
    if (r.status == TrialStatus::kPruned) return std::nullopt;
    r.reused = true;
    return r;
  } catch (const std::exception&) {
    return std::nullopt;  // a half-written earlier result: run it again
  }
}

void ResultsStore::record(const Row& row, const nlohmann::json& run_config,
                          const std::string& command) {
  const fs::path dir = experiment_dir(row.experiment.name);
  fs::create_directories(dir);
  const nlohmann::json exp = to_json(row.experiment);
  write_text_file((fs::path(exps_dir_) / (row.experiment.name + ".json")).string(),
                  exp.dump(2) + "\n");
  write_text_file((dir / "exp.json").string(), exp.dump(2) + "\n");
  if (!run_config.is_null())
    write_text_file((dir / "ds_config.json").string(), deepspeed_keys(run_config).dump(2) + "\n");
  if (!command.empty()) write_text_file((dir / "cmd.txt").string(), command + "\n");
  if (row.result.status == TrialStatus::kRan) {
    const nlohmann::json metrics = {{"latency", row.result.latency_ms},
                                    {"throughput", row.result.throughput},
                                    {"FLOPS_per_gpu", row.result.flops}};
    write_text_file((dir / "metrics.json").string(), metrics.dump(2) + "\n");
  }
  write_text_file((dir / "result.json").string(), to_json(row.result).dump(2) + "\n");
  rows_.push_back(row);
  write_rows();
}

void ResultsStore::write_rows() const {
  std::ostringstream out;
  for (const Row& r : rows_) out << row_json(r).dump() << "\n";
  write_text_file((fs::path(results_dir_) / "results.jsonl").string(), out.str());
}

}  // namespace deepshard::autotune
