// model_based's cost model: predicts an unexplored experiment's step time from the compute and
// communication measured by the finished ones. Compute per step is fitted (least squares over
// every finished run) as accumulation x (c0 + c1 x micro-batch) + an offset per knob setting
// (offload, checkpointing and buffers add per-step work); a setting not run yet takes the offset
// of the run setting with the most knob values in common, and the time blocked on collectives per
// micro-step of the runs with that setting. An experiment whose knobs ran out of
// memory or failed at a micro-batch no larger is predicted to fail. DeepSpeed fits XGBoost on the
// config values instead; this model needs no training set beyond a few runs. Private to the
// autotune layer.
#pragma once

#include <vector>

#include "autotune/experiment.h"

namespace deepshard::autotune {

class CostModel {
 public:
  void add(const Experiment& experiment, const ExperimentResult& result);
  // Predicted step seconds; a very large value for an experiment predicted to fail.
  double predict_step_s(const Experiment& experiment) const;
  // The metric the prediction gives (throughput, latency in ms, or FLOPS relative to throughput).
  double predict_metric(const Experiment& experiment, const std::string& metric) const;

 private:
  struct Observation {
    Experiment experiment;
    ExperimentResult result;
  };
  std::vector<Observation> observed_;
};

// The overrides that are knobs: all but the stage and the batch triple.
Overrides knob_settings(const Experiment& e);

}  // namespace deepshard::autotune
