// ActivationTracker (see activation_tracker.h).
#include "train/activation_tracker.h"

#include <torch/torch.h>

#include <algorithm>

#include "util/log.h"

namespace deepshard::train {
namespace {

// The DeepSpeed keys of the section that differ from their defaults.
std::vector<std::string> keys_set(const config::ActivationCheckpointingConfig& c) {
  std::vector<std::string> out;
  if (c.partition_activations) out.push_back("partition_activations");
  if (c.contiguous_memory_optimization) out.push_back("contiguous_memory_optimization");
  if (c.cpu_checkpointing) out.push_back("cpu_checkpointing");
  if (c.number_checkpoints) out.push_back("number_checkpoints");
  if (c.synchronize_checkpoint_boundary) out.push_back("synchronize_checkpoint_boundary");
  if (c.profile) out.push_back("profile");
  return out;
}

}  // namespace

ActivationTracker::ActivationTracker(const config::RunConfig& run, bool rank0,
                                     comm::Group* model_parallel) {
  config::ActivationCheckpointingConfig options = run.ds.activation_checkpointing;
  if (run.train.activation_checkpointing && options.contiguous_memory_optimization &&
      !options.number_checkpoints) {
    // DeepSpeed refuses this (its buffer needs a size); every block of the model is one region.
    options.number_checkpoints = run.model.n_layer;
    if (rank0)
      log::info(
          "activation_checkpointing.contiguous_memory_optimization without "
          "number_checkpoints: sized for the model's ",
          run.model.n_layer, " layers");
  }
  if (run.train.activation_checkpointing) {
    checkpointer_ = std::make_unique<activation::Checkpointer>(options, model_parallel);
    const int split = checkpointer_->model_parallel_size();
    std::string partition;
    if (options.partition_activations)
      partition = split > 1 ? "; partition_activations: the kept inputs split over the " +
                                  std::to_string(split) + " tensor-parallel ranks"
                            : "; partition_activations: model-parallel group of 1 rank, nothing "
                              "to split";
    if (rank0)
      log::info(
          "activation checkpointing: the model's checkpointable regions are recomputed in "
          "backward",
          options.number_checkpoints
              ? " (the first " + std::to_string(*options.number_checkpoints) + " per pass)"
              : std::string(""),
          partition);
  } else if (rank0) {
    const auto keys = keys_set(options);
    if (!keys.empty()) {
      std::string list;
      for (const auto& k : keys)
        list += (list.empty() ? "" : ", ") + std::string("activation_checkpointing.") + k;
      log::warn(list, " set but train.activation_checkpointing is false: nothing is recomputed");
    }
  }
  scope_ = std::make_unique<activation::ActivationMeter::Scope>(meter_);
}

ActivationTracker::~ActivationTracker() = default;

at::Tensor ActivationTracker::forward(const std::function<at::Tensor()>& forward) {
  activation::ActivationMeter::Window window(&meter_);
  if (!checkpointer_) return forward();
  activation::Checkpointer::Pass pass(*checkpointer_);
  return forward();
}

nlohmann::json ActivationTracker::end_step() {
  const auto peaks = meter_.finish_step();
  last_ = {peaks.kept, peaks.transient};
  run_peak_.kept = std::max(run_peak_.kept, peaks.kept);
  run_peak_.transient = std::max(run_peak_.transient, peaks.transient);
  nlohmann::json out = nlohmann::json::object();
  if (checkpointer_) {
    out["checkpointed_regions"] = checkpointer_->last_pass_regions();
    out["checkpoint_kept_bytes"] = checkpointer_->last_pass_kept_bytes();
    if (checkpointer_->options().profile) {
      nlohmann::json regions = nlohmann::json::array();
      for (const auto& t : checkpointer_->take_times())
        regions.push_back({{"forward_s", t.forward_s},
                           {"recompute_s", t.recompute_s},
                           {"backward_s", t.backward_s}});
      out["checkpoint_profile"] = regions;
    }
  }
  return out;
}

}  // namespace deepshard::train
