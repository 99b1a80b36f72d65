// The `autotuning` section: DeepSpeed's keys with its code defaults, checked values, and the keys
// that change nothing here warned by name; its presence no longer refuses the run.
#include <gtest/gtest.h>

#include "config/autotuning_config.h"
#include "config/config_test_helpers.h"

namespace deepshard::config {
namespace autotuning_section_test {

using namespace deepshard::config::testing;
using nlohmann::json;

bool any_contains(const std::vector<std::string>& lines, const std::string& text) {
  return std::any_of(lines.begin(), lines.end(),
                     [&](const std::string& l) { return l.find(text) != std::string::npos; });
}

AutotuningConfig read(const json& config, std::vector<std::string>* warnings = nullptr) {
  std::vector<std::string> ignored;
  return parse_autotuning_config(config, "t.json", warnings ? warnings : &ignored);
}

TEST(AutotuningSection, DeepSpeedDefaults) {
  const AutotuningConfig a = read(json::object());
  EXPECT_FALSE(a.enabled);
  EXPECT_TRUE(a.fast);
  EXPECT_EQ(a.results_dir, "autotuning_results");
  EXPECT_EQ(a.exps_dir, "autotuning_exps");
  EXPECT_TRUE(a.overwrite);
  EXPECT_EQ(a.metric, "throughput");
  EXPECT_EQ(a.start_profile_step, 3);
  EXPECT_EQ(a.end_profile_step, 5);
  EXPECT_EQ(a.tuner_type, "gridsearch");
  EXPECT_EQ(a.tuner_early_stopping, 5);
  EXPECT_EQ(a.tuner_num_trials, 50);
  EXPECT_FALSE(a.max_train_batch_size.has_value());
  EXPECT_EQ(a.min_train_batch_size, 1);
  EXPECT_EQ(a.max_train_micro_batch_size_per_gpu, 1024);
  EXPECT_EQ(a.min_train_micro_batch_size_per_gpu, 1);
  EXPECT_EQ(a.num_tuning_micro_batch_sizes, 3);
  EXPECT_EQ(a.mp_size, 1);
  EXPECT_TRUE(a.arg_mappings.empty());
}

TEST(AutotuningSection, EveryKeyIsRead) {
  const json section = {{"enabled", true},
                        {"fast", false},
                        {"results_dir", "r"},
                        {"exps_dir", "e"},
                        {"overwrite", false},
                        {"metric", "flops"},
                        {"start_profile_step", 2},
                        {"end_profile_step", 4},
                        {"tuner_type", "model_based"},
                        {"tuner_early_stopping", 3},
                        {"tuner_num_trials", 7},
                        {"arg_mappings", {{"train_micro_batch_size_per_gpu", "--batch"}}},
                        {"max_train_batch_size", 64},
                        {"min_train_batch_size", 4},
                        {"max_train_micro_batch_size_per_gpu", 16},
                        {"min_train_micro_batch_size_per_gpu", 2},
                        {"num_tuning_micro_batch_sizes", 2},
                        {"mp_size", 1}};
  const Parsed p = parse_ok(with_batch({{"autotuning", section}}));
  const AutotuningConfig a = read({{"autotuning", section}});
  EXPECT_TRUE(a.enabled);
  EXPECT_FALSE(a.fast);
  EXPECT_EQ(a.results_dir, "r");
  EXPECT_EQ(a.metric, "FLOPS");  // DeepSpeed's constant is "flops", its docs say "FLOPS"
  EXPECT_EQ(a.start_profile_step, 2);
  EXPECT_EQ(a.end_profile_step, 4);
  EXPECT_EQ(a.tuner_type, "model_based");
  EXPECT_EQ(a.arg_mappings.at("train_micro_batch_size_per_gpu"), "--batch");
  EXPECT_EQ(a.max_train_batch_size, 64);
  EXPECT_EQ(a.min_train_batch_size, 4);
  EXPECT_EQ(a.num_tuning_micro_batch_sizes, 2);
  // A plain run trains as configured, and says where the search runs.
  EXPECT_TRUE(
      any_contains(p.warnings, "test.json: autotuning: read by `deepshard launch --autotuning"));
  EXPECT_TRUE(any_contains(p.warnings, "autotuning.arg_mappings"));
  EXPECT_TRUE(unsupported_features(p.config).empty());
  // the same through the tuner's own reader
  std::vector<std::string> warnings;
  const AutotuningConfig b =
      parse_autotuning_config({{"autotuning", section}}, "t.json", &warnings);
  EXPECT_EQ(b.tuner_num_trials, 7);
  EXPECT_EQ(b.metric, "FLOPS");
}

TEST(AutotuningSection, BadValuesNameTheirKey) {
  EXPECT_THROW(read({{"autotuning", {{"tuner_type", "bayes"}}}}), ConfigError);
  EXPECT_NE(parse_error(with_batch({{"autotuning", {{"tuner_type", "bayes"}}}}))
                .find("autotuning.tuner_type"),
            std::string::npos);
  EXPECT_NE(
      parse_error(with_batch({{"autotuning", {{"metric", "speed"}}}})).find("autotuning.metric"),
      std::string::npos);
  EXPECT_NE(parse_error(with_batch({{"autotuning", {{"start_profile_step", 6}}}}))
                .find("autotuning.end_profile_step: 5 is before start_profile_step 6"),
            std::string::npos);
  EXPECT_NE(parse_error(with_batch({{"autotuning", {{"tuner_trials", 3}}}}))
                .find("autotuning.tuner_trials"),
            std::string::npos);
  EXPECT_NE(parse_error(with_batch({{"autotuning", {{"arg_mappings", {{"a", 1}}}}}}))
                .find("autotuning.arg_mappings"),
            std::string::npos);
}

TEST(AutotuningSection, KeysWithoutEffectWarnByName) {
  const Parsed p = parse_ok(with_batch({{"autotuning",
                                         {{"metric_path", "m.json"},
                                          {"model_info_path", "i.json"},
                                          {"model_info", {{"num_params", 10}}}}}}));
  EXPECT_TRUE(any_contains(p.warnings, "autotuning.metric_path"));
  EXPECT_TRUE(any_contains(p.warnings, "autotuning.model_info_path"));
  EXPECT_TRUE(any_contains(p.warnings, "autotuning.model_info"));
}

}  // namespace autotuning_section_test
}  // namespace deepshard::config
