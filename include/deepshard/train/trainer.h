// The training loop behind `deepshard train`: builds the model (model.arch's) from the run config,
// the data sampler and the engine, runs the optimizer steps, evaluates, logs metrics.jsonl (one
// record per optimizer step), prints a progress line, and writes summary.json (rank 0).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "deepshard/comm/group.h"
#include "deepshard/config/run_config.h"
#include "deepshard/train/model_factory.h"

namespace deepshard::train {

struct TrainSummary {
  int64_t steps = 0;
  double final_loss = 0.0;       // mean training loss of the last step (all ranks)
  double final_val_loss = -1.0;  // -1: no validation set
  // Classification task with a validation set: the last evaluation's accuracy over the validation
  // passages and the majority-class baseline's (-1: none).
  double final_val_accuracy = -1.0;
  double majority_baseline = -1.0;
  double mean_tokens_per_s = 0.0;       // over steps after the first (warm-up) step
  double comm_wait_share = 0.0;         // rank 0: share of those steps' time blocked on collectives
  std::vector<int64_t> peak_rss_bytes;  // per rank
  std::string sample;                   // text sampled at the end (rank 0), "" if none
  bool stopped = false;                 // SIGTERM/SIGINT ended the run early (after a save)
};

// Runs the whole training described by `run` on `group`. Every rank calls it.
TrainSummary run_training(const config::RunConfig& run, comm::Group& group);

}  // namespace deepshard::train
