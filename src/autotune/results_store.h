// results_dir and exps_dir of a tuning, as DeepSpeed lays them out: exps_dir/<name>.json describes
// each experiment; results_dir/<name>/ holds its cmd.txt, ds_config.json, exp.json, metrics.json,
// stdout.log and the run folder (run/); results_dir/results.jsonl has one row per experiment
// (ran, out of memory, pruned or failed, with the reason), summary.txt DeepSpeed's table of the
// best per tuning space. With autotuning.overwrite false, experiments whose result.json exists
// from an earlier (possibly interrupted) tuning are read back instead of run again.
// Private to the autotune layer.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "autotune/experiment.h"

namespace deepshard::autotune {

struct Row {
  Experiment experiment;
  ExperimentResult result;
  Overrides config_diff;  // what differs from the user's config, as given to the run
};

class ResultsStore {
 public:
  // Creates the folders; with `overwrite` empties them first (DeepSpeed's overwrite: true).
  ResultsStore(std::string results_dir, std::string exps_dir, bool overwrite);

  const std::string& results_dir() const { return results_dir_; }
  std::string experiment_dir(const std::string& name) const;

  // The result of an earlier tuning for an experiment with the same name and overrides (never a
  // pruned one: pruning is decided again), else nullopt.
  std::optional<ExperimentResult> finished(const Experiment& e) const;

  // Records the experiment: exps_dir/<name>.json, results_dir/<name>/{exp.json, result.json,
  // metrics.json, ds_config.json, cmd.txt}, and the row (results.jsonl is rewritten each time, so
  // an interrupted tuning leaves every finished row).
  void record(const Row& row, const nlohmann::json& run_config, const std::string& command);

  const std::vector<Row>& rows() const { return rows_; }

 private:
  void write_rows() const;

  std::string results_dir_, exps_dir_;
  std::vector<Row> rows_;
};

// The row as results.jsonl has it: the result's fields, the experiment's name, space, stage and
// batch triple, its config difference from the user's, and whether it was reused.
nlohmann::json row_json(const Row& row);

// Writes `text` to `path` through a temporary file and a rename (a reader never sees half a file).
void write_text_file(const std::string& path, const std::string& text);

// The DeepSpeed keys of a run config: without deepshard's own sections (model, data, train, comm)
// and without autotuning (DeepSpeed's ds_config_optimal.json drops it too).
nlohmann::json deepspeed_keys(const nlohmann::json& run_config);

}  // namespace deepshard::autotune
