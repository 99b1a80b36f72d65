// The order in which a tuning space's experiments are tried (autotuning.tuner_type) and DeepSpeed's
// stopping rules: at most tuner_num_trials experiments, and none more once tuner_early_stopping
// experiments in a row brought no better one. gridsearch: in the space's order; random: in a
// shuffled order (a fixed seed, so a resumed tuning asks for the same ones); model_based: the first
// two in order, then always the unexplored experiment the cost model (cost_model.h) predicts best.
// Private to the autotune layer.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autotune/experiment.h"

namespace deepshard::autotune {

class Search {
 public:
  virtual ~Search() = default;
  // The index of the next experiment to try, or nullopt when none is left.
  virtual std::optional<size_t> next() = 0;
  // The outcome of experiment `index` (what model_based learns from).
  virtual void observe(size_t index, const ExperimentResult& result) = 0;
  // An experiment outside this space that already ran (the micro-batch phase's), to learn from.
  virtual void learn(const Experiment&, const ExperimentResult&) {}
};

std::unique_ptr<Search> make_search(const std::string& tuner_type, const std::string& metric,
                                    const std::vector<Experiment>& experiments);

// Runs experiments through `evaluate` in the search's order; returns how many ran.
size_t run_search(Search& search, const std::vector<Experiment>& experiments, int64_t num_trials,
                  int64_t early_stopping, const std::string& metric,
                  const std::function<ExperimentResult(const Experiment&)>& evaluate);

}  // namespace deepshard::autotune
