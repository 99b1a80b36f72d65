// The `autotuning` section (src/config/autotuning_config.h): its schema, read when a
// run's config is parsed (validated and its keys without effect warned; the run itself does not
// use it) and by the tuner from a config whose other sections may hold tuning lists.
#include <nlohmann/json.hpp>

#include "config/sections.h"
#include "deepshard/util/error.h"

namespace deepshard::config::detail {
namespace {

template <typename S, typename C>
void visit_autotuning(S& s, C& c) {
  s.field("enabled", c.enabled);
  s.field("fast", c.fast);
  s.field("results_dir", c.results_dir);
  s.field("exps_dir", c.exps_dir);
  s.field("overwrite", c.overwrite);
  s.field("metric", c.metric, Check::one_of({"throughput", "latency", "FLOPS"}, true));
  s.field("start_profile_step", c.start_profile_step, Check::at_least(1));
  s.field("end_profile_step", c.end_profile_step, Check::at_least(1));
  s.field("metric_path", c.metric_path);
  s.field("model_info_path", c.model_info_path);
  s.field("tuner_type", c.tuner_type, Check::one_of({"gridsearch", "random", "model_based"}));
  s.field("tuner_early_stopping", c.tuner_early_stopping, Check::at_least(1));
  s.field("tuner_num_trials", c.tuner_num_trials, Check::at_least(1));
  s.field("arg_mappings", c.arg_mappings);
  s.field("max_train_batch_size", c.max_train_batch_size, Check::at_least(1));
  s.field("min_train_batch_size", c.min_train_batch_size, Check::at_least(1));
  s.field("max_train_micro_batch_size_per_gpu", c.max_train_micro_batch_size_per_gpu,
          Check::at_least(1));
  s.field("min_train_micro_batch_size_per_gpu", c.min_train_micro_batch_size_per_gpu,
          Check::at_least(1));
  s.field("num_tuning_micro_batch_sizes", c.num_tuning_micro_batch_sizes, Check::at_least(1));
  s.field("mp_size", c.mp_size, Check::at_least(1));
  s.declare("model_info");  // DeepSpeed's given model facts; the profile run measures them here
}

}  // namespace

void parse_autotuning(Section& root, AutotuningConfig& config) {
  Section s = root.child("autotuning");
  visit_autotuning(s, config);
  s.finish();
  // DeepSpeed's spelling is "FLOPS" (its constant "flops"); stored canonical.
  if (to_lower(config.metric) == "flops") config.metric = "FLOPS";
  if (to_lower(config.metric) == "throughput" || to_lower(config.metric) == "latency")
    config.metric = to_lower(config.metric);
  if (config.end_profile_step < config.start_profile_step) {
    root.diag().error("autotuning.end_profile_step", std::to_string(config.end_profile_step) +
                                                         " is before start_profile_step " +
                                                         std::to_string(config.start_profile_step));
  }
  if (config.results_dir.empty()) root.diag().error("autotuning.results_dir", "must not be empty");
  if (config.exps_dir.empty()) root.diag().error("autotuning.exps_dir", "must not be empty");
  if (const nlohmann::json* a = root.get("autotuning"); a != nullptr && a->is_object()) {
    auto info = a->find("model_info");
    config.model_info_given = info != a->end() && !info->is_null();
  }
  auto& diag = root.diag();
  if (config.metric_path)
    diag.warn("autotuning.metric_path",
              "\"" + *config.metric_path +
                  "\" is accepted but ignored: each experiment's metrics.json is written in its "
                  "own folder under results_dir");
  if (config.model_info_path)
    diag.warn("autotuning.model_info_path",
              "\"" + *config.model_info_path +
                  "\" is accepted but ignored: the profile run's model_info.json is written under "
                  "results_dir");
  if (config.model_info_given)
    diag.warn("autotuning.model_info",
              "accepted but ignored: the tuner's profile run always measures the model");
  if (!config.arg_mappings.empty())
    diag.warn("autotuning.arg_mappings",
              "accepted but ignored: the tuner gives every value to `deepshard train` as --set "
              "key=value");
}

}  // namespace deepshard::config::detail

namespace deepshard::config {

AutotuningConfig parse_autotuning_config(const nlohmann::json& config, const std::string& origin,
                                         std::vector<std::string>* warnings) {
  detail::Diagnostics diag(origin, warnings);
  AutotuningConfig out;
  detail::Section root(&config, "", diag);
  detail::parse_autotuning(root, out);
  diag.throw_if_errors();
  return out;
}

}  // namespace deepshard::config
