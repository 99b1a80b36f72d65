// The searches and their loop (search.h).
#include "autotune/search.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "autotune/cost_model.h"

namespace deepshard::autotune {
namespace {

// gridsearch and random: a fixed order.
class OrderedSearch : public Search {
 public:
  explicit OrderedSearch(std::vector<size_t> order) : order_(std::move(order)) {}
  std::optional<size_t> next() override {
    if (position_ >= order_.size()) return std::nullopt;
    return order_[position_++];
  }
  void observe(size_t, const ExperimentResult&) override {}

 private:
  std::vector<size_t> order_;
  size_t position_ = 0;
};

class ModelBasedSearch : public Search {
 public:
  ModelBasedSearch(const std::string& metric, const std::vector<Experiment>& experiments)
      : metric_(metric), experiments_(experiments), tried_(experiments.size(), false) {}

  std::optional<size_t> next() override {
    constexpr size_t kInitialTrials = 2;  // DeepSpeed's INIT_NUM, tried in order
    std::optional<size_t> pick;
    if (observed_ < kInitialTrials) {
      for (size_t i = 0; i < tried_.size() && !pick; ++i)
        if (!tried_[i]) pick = i;
    } else {
      double best = 0;
      for (size_t i = 0; i < tried_.size(); ++i) {
        if (tried_[i]) continue;
        const double predicted = model_.predict_metric(experiments_[i], metric_);
        if (!pick || better(predicted, best, metric_)) {
          pick = i;
          best = predicted;
        }
      }
    }
    if (pick) tried_[*pick] = true;
    return pick;
  }

  void observe(size_t index, const ExperimentResult& result) override {
    model_.add(experiments_[index], result);
    ++observed_;
  }
  void learn(const Experiment& e, const ExperimentResult& result) override {
    model_.add(e, result);
  }

 private:
  std::string metric_;
  std::vector<Experiment> experiments_;
  std::vector<bool> tried_;
  CostModel model_;
  size_t observed_ = 0;
};

}  // namespace

std::unique_ptr<Search> make_search(const std::string& tuner_type, const std::string& metric,
                                    const std::vector<Experiment>& experiments) {
  if (tuner_type == "model_based") return std::make_unique<ModelBasedSearch>(metric, experiments);
  std::vector<size_t> order(experiments.size());
  std::iota(order.begin(), order.end(), size_t{0});
  if (tuner_type == "random") {
    std::mt19937 generator(static_cast<unsigned>(experiments.size()));
    std::shuffle(order.begin(), order.end(), generator);
  }
  return std::make_unique<OrderedSearch>(std::move(order));
}

size_t run_search(Search& search, const std::vector<Experiment>& experiments, int64_t num_trials,
                  int64_t early_stopping, const std::string& metric,
                  const std::function<ExperimentResult(const Experiment&)>& evaluate) {
  size_t trials = 0, best_trial = 0;
  std::optional<double> best;
  while (static_cast<int64_t>(trials) < num_trials) {
    const auto index = search.next();
    if (!index) break;
    const ExperimentResult result = evaluate(experiments[*index]);
    search.observe(*index, result);
    if (result.status == TrialStatus::kPruned) continue;  // decided without a run
    ++trials;
    if (result.status == TrialStatus::kRan) {
      const double value = metric_value(result, metric);
      if (!best || better(value, *best, metric)) {
        best = value;
        best_trial = trials;
      }
    }
    // DeepSpeed's early stopping: `early_stopping` trials past the best one without a better.
    if (static_cast<int64_t>(trials) >= static_cast<int64_t>(best_trial) + early_stopping) break;
  }
  return trials;
}

}  // namespace deepshard::autotune
