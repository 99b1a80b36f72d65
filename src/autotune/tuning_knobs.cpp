// The knob space per stage (tuning_knobs.h).
#include "autotune/tuning_knobs.h"

#include <algorithm>
#include <string>
#include <utility>

namespace deepshard::autotune {
namespace {

using Values = std::vector<nlohmann::json>;

// DeepSpeed's bucket sizes; those at or above the parameter count all mean one bucket: the
// smallest of them stands for all, and a quarter of the model adds a several-bucket case.
Values bucket_sizes(int64_t num_params) {
  Values out;
  const int64_t quarter = num_params / 4;
  if (quarter >= 1000) out.push_back(quarter);
  bool whole = false;
  for (int64_t size : {int64_t{50'000'000}, int64_t{500'000'000}, int64_t{1'000'000'000}}) {
    if (size < num_params) {
      out.push_back(size);
    } else if (!whole) {
      out.push_back(size);
      whole = true;
    }
  }
  return out;
}

std::vector<std::pair<std::string, Values>> default_knobs(int stage, int64_t num_params) {
  const Values on_off = {false, true};
  std::vector<std::pair<std::string, Values>> knobs;
  if (stage >= 1)
    knobs.push_back({"zero_optimization.reduce_bucket_size", bucket_sizes(num_params)});
  if (stage == 1 || stage == 2)
    knobs.push_back({"zero_optimization.allgather_bucket_size", bucket_sizes(num_params)});
  if (stage >= 2) knobs.push_back({"zero_optimization.overlap_comm", on_off});
  if (stage == 2) {
    knobs.push_back({"zero_optimization.reduce_scatter", on_off});
    knobs.push_back({"zero_optimization.contiguous_gradients", on_off});
  }
  if (stage == 3) {
    knobs.push_back({"zero_optimization.stage3_prefetch_bucket_size",
                     {0, std::max<int64_t>(1, num_params / 4), 50'000'000}});
    knobs.push_back({"zero_optimization.stage3_param_persistence_threshold", {0, 100'000}});
  }
  if (stage >= 1)
    knobs.push_back({"zero_optimization.offload_optimizer",
                     {nlohmann::json{{"device", "none"}}, nlohmann::json{{"device", "cpu"}}}});
  knobs.push_back({"train.activation_checkpointing", on_off});
  return knobs;
}

}  // namespace

std::vector<std::string> tunable_paths() {
  std::vector<std::string> out = {"zero_optimization.stage", "train_micro_batch_size_per_gpu"};
  for (int stage = 0; stage <= 3; ++stage) {
    for (const auto& [path, values] : default_knobs(stage, 0)) {
      if (std::find(out.begin(), out.end(), path) == out.end()) out.push_back(path);
    }
  }
  return out;
}

std::vector<Overrides> knob_space(int stage, const nlohmann::json& user_config,
                                  int64_t num_params) {
  std::vector<std::pair<std::string, Values>> knobs;
  for (auto& [path, values] : default_knobs(stage, num_params)) {
    const nlohmann::json user = value_at_path(user_config, path);
    if (user.is_array()) {
      knobs.push_back({path, Values(user.begin(), user.end())});
    } else if (user.is_null()) {
      // offload_optimizer given as an object (its device set) is the user's choice, not tuned
      knobs.push_back({path, values});
    }
  }
  std::vector<Overrides> out = {{}};
  for (const auto& [path, values] : knobs) {
    if (values.size() < 2) continue;  // one value: nothing to choose (the config's own)
    std::vector<Overrides> next;
    for (const auto& o : out) {
      for (const auto& v : values) {
        Overrides with = o;
        with[path] = v;
        next.push_back(std::move(with));
      }
    }
    out = std::move(next);
  }
  return out;
}

}  // namespace deepshard::autotune
