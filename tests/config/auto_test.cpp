// "auto" values: filled from the run's train values and the model's hidden size, DeepSpeed's
// default where it is meaningful, an error naming the key otherwise; explicit values that
// contradict a train value are errors.
#include <gtest/gtest.h>

#include "config/config_test_helpers.h"

namespace deepshard::config {
namespace auto_test {

using namespace deepshard::config::testing;
using nlohmann::json;

// The shape of Hugging Face's ds_config_zero2.json: everything the trainer knows is "auto".
const json kAllAuto = {
    {"train_batch_size", "auto"},
    {"train_micro_batch_size_per_gpu", "auto"},
    {"gradient_accumulation_steps", "auto"},
    {"gradient_clipping", "auto"},
    {"fp16", {{"enabled", "auto"}}},
    {"bf16", {{"enabled", "auto"}}},
    {"optimizer",
     {{"type", "AdamW"},
      {"params", {{"lr", "auto"}, {"betas", "auto"}, {"eps", "auto"}, {"weight_decay", "auto"}}}}},
    {"scheduler",
     {{"type", "WarmupDecayLR"},
      {"params",
       {{"warmup_min_lr", "auto"},
        {"warmup_max_lr", "auto"},
        {"warmup_num_steps", "auto"},
        {"total_num_steps", "auto"}}}}},
    {"zero_optimization",
     {{"reduce_bucket_size", "auto"},
      {"stage3_prefetch_bucket_size", "auto"},
      {"stage3_param_persistence_threshold", "auto"}}},
};

ResolveContext full_context() {
  ResolveContext c = context(2);
  c.hidden_size = 128;
  c.train.micro_batch_size = 4;
  c.train.gradient_accumulation_steps = 3;
  c.train.lr = 6e-4;
  c.train.weight_decay = 0.1;
  c.train.warmup_steps = 20;
  c.train.steps = 500;
  c.train.max_grad_norm = 0.5;
  c.train.precision = "bf16";
  return c;
}

TEST(Auto, FilledFromTrainValuesAndHiddenSize) {
  Parsed p = parse_ok(kAllAuto, full_context());
  const DsConfig& c = p.config;
  EXPECT_EQ(c.train_micro_batch_size_per_gpu, 4);
  EXPECT_EQ(c.gradient_accumulation_steps, 3);
  EXPECT_EQ(c.train_batch_size, 4 * 3 * 2);
  EXPECT_EQ(c.gradient_clipping, 0.5);
  EXPECT_FALSE(c.fp16.enabled);
  EXPECT_TRUE(c.bf16.enabled);
  EXPECT_EQ(c.optimizer.lr, 6e-4);
  EXPECT_EQ(c.optimizer.weight_decay, 0.1);
  EXPECT_EQ(c.scheduler.warmup_max_lr, 6e-4);
  EXPECT_EQ(c.scheduler.warmup_num_steps, 20);
  EXPECT_EQ(c.scheduler.total_num_steps, 500);
  EXPECT_EQ(c.zero.reduce_bucket_size, 128 * 128);
  EXPECT_EQ(c.zero.prefetch_bucket_size, 14745);  // int(0.9 * 128 * 128)
  EXPECT_EQ(c.zero.param_persistence_threshold, 1280);
  EXPECT_TRUE(p.warnings.empty()) << p.warnings.front();
}

TEST(Auto, DefaultsWhereDeepSpeedHasAMeaningfulOne) {
  ResolveContext c = context(1);
  c.train.micro_batch_size = 2;
  c.train.lr = 1e-3;
  c.train.warmup_steps = 5;
  Parsed p = parse_ok(kAllAuto, c);
  EXPECT_EQ(p.config.train_batch_size, 2);
  EXPECT_EQ(p.config.gradient_accumulation_steps, 1);
  EXPECT_EQ(p.config.gradient_clipping, 1.0);
  EXPECT_FALSE(p.config.fp16.enabled);
  EXPECT_FALSE(p.config.bf16.enabled);
  EXPECT_EQ(p.config.optimizer.betas[0], 0.9);
  EXPECT_EQ(p.config.optimizer.betas[1], 0.999);
  EXPECT_EQ(p.config.optimizer.eps, 1e-8);
  EXPECT_EQ(p.config.optimizer.weight_decay, 0.0);
  EXPECT_EQ(p.config.scheduler.warmup_min_lr, 0.0);
  EXPECT_EQ(p.config.scheduler.total_num_steps, c.train.steps);
  // No hidden size: DeepSpeed's bucket defaults.
  EXPECT_EQ(p.config.zero.reduce_bucket_size, 500'000'000);
  EXPECT_EQ(p.config.zero.prefetch_bucket_size, 50'000'000);
  EXPECT_EQ(p.config.zero.param_persistence_threshold, 100'000);
}

TEST(Auto, UnresolvableKeysAreNamed) {
  ResolveContext c = context(1);
  EXPECT_EQ(parse_error(kAllAuto, c),
            "test.json: optimizer.params.lr: \"auto\" cannot be resolved: set train.lr in the run "
            "file or give a number\n"
            "test.json: scheduler.params.warmup_max_lr: \"auto\" cannot be resolved: set train.lr "
            "in the run file or give a number\n"
            "test.json: scheduler.params.warmup_num_steps: \"auto\" cannot be resolved: set "
            "train.warmup_steps in the run file or give a number\n"
            "test.json: train_micro_batch_size_per_gpu: \"auto\" cannot be resolved: set "
            "train.micro_batch_size in the run file or give a number");
  // An "auto" batch size is fine when the others determine it.
  Parsed p = parse_ok({{"train_batch_size", 32}, {"train_micro_batch_size_per_gpu", "auto"}}, c);
  EXPECT_EQ(p.config.train_micro_batch_size_per_gpu, 32);
}

TEST(Auto, KeysWithoutARuleKeepTheDefaultWithAWarning) {
  Parsed p = parse_ok(with_batch({{"zero_optimization", {{"stage", "auto"}}}}));
  EXPECT_EQ(p.config.zero.stage, 0);
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_EQ(p.warnings[0],
            "test.json: zero_optimization.stage: \"auto\" has no value to fill it; DeepSpeed's "
            "default applies");
}

TEST(Auto, ExplicitValuesMustAgreeWithTrainValues) {
  ResolveContext c = context(1);
  c.train.lr = 1e-3;
  c.train.micro_batch_size = 4;
  EXPECT_EQ(parse_error({{"train_micro_batch_size_per_gpu", 8},
                         {"optimizer", {{"type", "AdamW"}, {"params", {{"lr", 3e-5}}}}}},
                        c),
            "test.json: train_micro_batch_size_per_gpu: 8 contradicts train.micro_batch_size = 4 "
            "(write \"auto\" or make them equal)\n"
            "test.json: optimizer.params.lr: 3e-05 contradicts train.lr = 0.001 (write \"auto\" or "
            "make them equal)");
  // Equal values are fine.
  Parsed p = parse_ok({{"train_micro_batch_size_per_gpu", 4},
                       {"optimizer", {{"type", "AdamW"}, {"params", {{"lr", 1e-3}}}}}},
                      c);
  EXPECT_EQ(p.config.train_batch_size, 4);
}

TEST(Auto, PrecisionMustMatchTheDeepSpeedKeys) {
  ResolveContext c = context(1);
  c.train.precision = "bf16";
  EXPECT_EQ(parse_error(with_batch(json::object()), c),
            "test.json: train.precision: \"bf16\" but the DeepSpeed keys select fp32 "
            "(fp16.enabled / bf16.enabled); write \"auto\" there or make them agree");
  EXPECT_TRUE(parse_ok(with_batch({{"bf16", {{"enabled", true}}}}), c).config.bf16.enabled);
  c.train.precision = "fp16";
  Parsed p =
      parse_ok(with_batch({{"fp16", {{"enabled", "auto"}}}, {"bf16", {{"enabled", "auto"}}}}), c);
  EXPECT_TRUE(p.config.fp16.enabled);
  EXPECT_FALSE(p.config.bf16.enabled);
}

}  // namespace auto_test
}  // namespace deepshard::config
