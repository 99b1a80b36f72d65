// CostModel (cost_model.h).
#include "autotune/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace deepshard::autotune {
namespace {

constexpr double kFails = 1e12;  // the step time of an experiment predicted to fail

size_t common_knobs(const Overrides& a, const Overrides& b) {
  size_t n = 0;
  for (const auto& [k, v] : a) {
    auto it = b.find(k);
    if (it != b.end() && it->second == v) ++n;
  }
  return n;
}

}  // namespace

Overrides knob_settings(const Experiment& e) {
  Overrides out = e.overrides;
  for (const char* k : {"zero_optimization.stage", "train_micro_batch_size_per_gpu",
                        "gradient_accumulation_steps", "train_batch_size", "train.micro_batch_size",
                        "train.gradient_accumulation_steps"})
    out.erase(k);
  return out;
}

void CostModel::add(const Experiment& experiment, const ExperimentResult& result) {
  if (result.status == TrialStatus::kPruned) return;
  observed_.push_back({experiment, result});
}

double CostModel::predict_step_s(const Experiment& e) const {
  const Overrides knobs = knob_settings(e);
  std::vector<const Observation*> ran;
  for (const auto& o : observed_) {
    const bool same_knobs = knob_settings(o.experiment) == knobs;
    if (o.result.status != TrialStatus::kRan) {
      if (same_knobs && o.experiment.micro_batch <= e.micro_batch) return kFails;
      continue;
    }
    ran.push_back(&o);
  }
  if (ran.empty()) return 0;  // nothing to go by: every experiment looks equally good
  // The knob settings seen, each with its own per-step offset column.
  std::vector<Overrides> settings;
  for (const auto* o : ran) {
    const Overrides k = knob_settings(o->experiment);
    if (std::find(settings.begin(), settings.end(), k) == settings.end()) settings.push_back(k);
  }
  const size_t n = 2 + settings.size();
  const auto features = [&](const Experiment& x, size_t setting) {
    std::vector<double> f(n, 0.0);
    f[0] = double(x.accumulation);
    f[1] = double(x.accumulation) * double(x.micro_batch);
    f[2 + setting] = 1.0;
    return f;
  };
  // Least squares (normal equations, a tiny ridge term: the minimum-norm fit when the runs do not
  // determine every coefficient, exact for predictions within what they determine).
  std::vector<std::vector<double>> a(n, std::vector<double>(n + 1, 0.0));
  for (const auto* o : ran) {
    const size_t k = static_cast<size_t>(
        std::find(settings.begin(), settings.end(), knob_settings(o->experiment)) -
        settings.begin());
    const auto f = features(o->experiment, k);
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < n; ++j) a[i][j] += f[i] * f[j];
      a[i][n] += f[i] * o->result.compute_s;
    }
  }
  for (size_t i = 0; i < n; ++i) a[i][i] += 1e-9 * (1.0 + a[i][i]);
  for (size_t c = 0; c < n; ++c) {
    size_t pivot = c;
    for (size_t r = c + 1; r < n; ++r)
      if (std::abs(a[r][c]) > std::abs(a[pivot][c])) pivot = r;
    std::swap(a[c], a[pivot]);
    for (size_t r = 0; r < n; ++r) {
      if (r == c || a[c][c] == 0) continue;
      const double factor = a[r][c] / a[c][c];
      for (size_t j = c; j <= n; ++j) a[r][j] -= factor * a[c][j];
    }
  }
  std::vector<double> coef(n, 0.0);
  for (size_t i = 0; i < n; ++i) coef[i] = a[i][i] != 0 ? a[i][n] / a[i][i] : 0.0;
  // An unseen knob setting takes the offset of the seen one with the most values in common, and
  // the comm wait per micro-step of the runs with that setting.
  size_t nearest = 0, best_common = 0;
  for (size_t k = 0; k < settings.size(); ++k) {
    const size_t common = settings[k] == knobs ? SIZE_MAX : common_knobs(settings[k], knobs);
    if (k == 0 || common > best_common) {
      nearest = k;
      best_common = common;
    }
  }
  double wait = 0;
  int count = 0;
  for (const auto* o : ran) {
    if (knob_settings(o->experiment) != settings[nearest]) continue;
    wait += o->result.comm_wait_s / double(o->experiment.accumulation);
    ++count;
  }
  const auto f = features(e, nearest);
  double compute = 0;
  for (size_t i = 0; i < n; ++i) compute += coef[i] * f[i];
  return std::max(1e-9, compute + wait / count * double(e.accumulation));
}

double CostModel::predict_metric(const Experiment& e, const std::string& metric) const {
  const double step_s = predict_step_s(e);
  if (metric == "latency") return 1e3 * step_s;
  if (step_s >= kFails) return 0;
  return double(e.train_batch) / step_s;  // throughput; FLOPS ranks the same way
}

}  // namespace deepshard::autotune
