// The training loop of a deepshard model, DeepSpeed's: `loss = engine(input_ids, labels);
// engine.backward(loss); engine.step()`. initialize gives the engine of such a loop; run_training
// is the loop behind `deepshard train`: it builds the model (model.arch's) from the run config, the
// data sampler and the engine, runs the optimizer steps, evaluates, logs metrics.jsonl (one record
// per optimizer step), prints a progress line, and writes summary.json (rank 0).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "deepshard/comm/group.h"
#include "deepshard/config/ds_config.h"
#include "deepshard/config/run_config.h"
#include "deepshard/models/causal_lm.h"
#include "deepshard/train/model_factory.h"
#include "deepshard/zero/engine.h"
#include "deepshard/zero/partitioned_build.h"

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

// deepspeed.initialize for a deepshard model: the ZeRO engine of `config` whose call
// `(*engine)(input_ids, labels)` is the model's mean loss on the micro-batch (model_loss), as a
// Hugging Face model returns outputs.loss for DeepSpeed's loop:
//   auto loss = (*engine)(input_ids, labels);  engine->backward(loss);  engine->step();
std::unique_ptr<zero::Engine> initialize(std::shared_ptr<models::CausalLmImpl> model,
                                         const config::DsConfig& config, comm::Group& group,
                                         zero::PartitionedBuild* build = nullptr);

// The loss engine(input_ids, labels) computes for `model`: labels [B, T] the language-model loss
// (model.loss; -100 targets left out), labels [B] the sequence classification loss of the model's
// classification head (model.classification_loss); other shapes throw Error.
at::Tensor model_loss(models::CausalLmImpl& model, const at::Tensor& input_ids,
                      const at::Tensor& labels);

// Runs the whole training described by `run` on `group`. Every rank calls it.
TrainSummary run_training(const config::RunConfig& run, comm::Group& group);

}  // namespace deepshard::train
