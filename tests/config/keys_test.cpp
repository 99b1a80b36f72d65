// Tests of individual DeepSpeed keys: unknown keys with suggestions, numbers and ranges, the
// stage3_* aliases, deprecated keys, DeepSpeed's cross-key assertions, optimizer and scheduler
// types, and that every error of a file is reported at once.
#include <gtest/gtest.h>

#include "config/config_test_helpers.h"
#include "util/strings.h"

namespace deepshard::config {
namespace keys_test {

using namespace deepshard::config::testing;
using nlohmann::json;

TEST(UnknownKeys, InsideASectionAreErrorsWithTheClosestKey) {
  EXPECT_EQ(parse_error(with_batch({{"zero_optimization", {{"reduce_bucket_sise", 5e8}}}})),
            "test.json: zero_optimization.reduce_bucket_sise: unknown key (did you mean "
            "'reduce_bucket_size'?)");
  EXPECT_EQ(parse_error(with_batch(
                {{"zero_optimization", {{"offload_optimizer", {{"pin_memroy", true}}}}}})),
            "test.json: zero_optimization.offload_optimizer.pin_memroy: unknown key (did you mean "
            "'pin_memory'?)");
  EXPECT_EQ(parse_error(with_batch({{"fp16", {{"initial_scale_pow", 12}}}})),
            "test.json: fp16.initial_scale_pow: unknown key (did you mean 'initial_scale_power'?)");
  EXPECT_EQ(parse_error(with_batch({{"zero_optimization", {{"frobnicate", 1}}}})),
            "test.json: zero_optimization.frobnicate: unknown key");
  // offload_param has no `ratio` (an offload_optimizer key).
  EXPECT_EQ(parse_error(with_batch({{"zero_optimization", {{"offload_param", {{"ratio", 0.5}}}}}})),
            "test.json: zero_optimization.offload_param.ratio: unknown key");
}

TEST(UnknownKeys, AtTopLevelAreWarningsAsDeepSpeedIgnoresThem) {
  Parsed p = parse_ok(with_batch({{"gradient_clippin", 0.5}, {"model", {{"n_layer", 2}}}}));
  ASSERT_EQ(p.warnings.size(), 2u);
  EXPECT_EQ(p.warnings[0],
            "test.json: gradient_clippin: unknown key, ignored as DeepSpeed does (did you mean "
            "'gradient_clipping'?)");
  EXPECT_EQ(p.warnings[1].rfind("test.json: model: unknown key, ignored", 0), 0u) << p.warnings[1];
  EXPECT_EQ(p.config.gradient_clipping, 1.0);

  // A run file's own sections are not DeepSpeed keys: no warning for them there.
  std::vector<std::string> warnings;
  parse_ds_config(with_batch({{"model", {{"n_layer", 2}}}, {"train", json::object()}}), context(),
                  &warnings, /*run_file=*/true);
  EXPECT_TRUE(warnings.empty());
}

TEST(Numbers, IntegersWrittenAsFloatsAreAccepted) {
  Parsed p = parse_ok(
      with_batch({{"zero_optimization", {{"reduce_bucket_size", 5e8}, {"sub_group_size", 1e14}}}}));
  EXPECT_EQ(p.config.zero.reduce_bucket_size, 500'000'000);
  EXPECT_EQ(p.config.zero.sub_group_size, 100'000'000'000'000);
  EXPECT_EQ(parse_error(with_batch({{"zero_optimization", {{"reduce_bucket_size", 2.5}}}})),
            "test.json: zero_optimization.reduce_bucket_size: expected an integer, found 2.5");
  EXPECT_EQ(parse_error(with_batch({{"zero_optimization", {{"stage", true}}}})),
            "test.json: zero_optimization.stage: expected an integer, found true (booleans are not "
            "numbers)");
  EXPECT_EQ(parse_error(with_batch({{"zero_optimization", {{"stage", "2"}}}})),
            "test.json: zero_optimization.stage: expected an integer, found the string \"2\"");
  EXPECT_EQ(parse_error(with_batch({{"zero_optimization", {{"allgather_bucket_size", 1e19}}}})),
            "test.json: zero_optimization.allgather_bucket_size: expected an integer, found "
            "1e+19");
}

TEST(Numbers, RangesAreChecked) {
  EXPECT_EQ(parse_error(with_batch({{"zero_optimization", {{"stage", 4}}}})),
            "test.json: zero_optimization.stage: 4 is out of range: must be between 0 and 3");
  EXPECT_EQ(parse_error(with_batch({{"zero_optimization", {{"reduce_bucket_size", -1}}}})),
            "test.json: zero_optimization.reduce_bucket_size: -1 is out of range: must be >= 0");
  EXPECT_EQ(parse_error(with_batch({{"fp16", {{"loss_scale", -1}}}})),
            "test.json: fp16.loss_scale: -1 is out of range: must be >= 0");
  EXPECT_EQ(parse_error(with_batch({{"gradient_clipping", -0.5}})),
            "test.json: gradient_clipping: -0.5 is out of range: must be >= 0");
  EXPECT_EQ(
      parse_error(with_batch({{"zero_optimization", {{"offload_optimizer", {{"ratio", 1.5}}}}}})),
      "test.json: zero_optimization.offload_optimizer.ratio: 1.5 is out of range: must be "
      "between 0 and 1");
  EXPECT_EQ(
      parse_error(with_batch({{"zero_optimization", {{"offload_param", {{"device", "gpu"}}}}}})),
      "test.json: zero_optimization.offload_param.device: expected one of \"none\", \"cpu\", "
      "\"nvme\", found the string \"gpu\"");
}

TEST(Numbers, DynamicLossScalingNeedsPositiveWindowAndMinimum) {
  EXPECT_EQ(parse_error(with_batch({{"fp16", {{"enabled", true}, {"loss_scale_window", 0}}}})),
            "test.json: fp16.loss_scale_window: 0 is out of range: dynamic loss scaling needs a "
            "window > 0");
  EXPECT_EQ(parse_error(with_batch({{"fp16", {{"enabled", true}, {"min_loss_scale", 0}}}})),
            "test.json: fp16.min_loss_scale: 0 is out of range: dynamic loss scaling needs "
            "min_loss_scale > 0");
  // A static loss scale does not use them.
  Parsed p = parse_ok(
      with_batch({{"fp16", {{"enabled", true}, {"loss_scale", 128}, {"loss_scale_window", 0}}}}));
  EXPECT_FALSE(p.config.fp16.dynamic());
  EXPECT_EQ(p.config.fp16.loss_scale, 128.0);
}

TEST(Aliases, Stage3PrefixIsOptional) {
  Parsed a = parse_ok(with_batch({{"zero_optimization", {{"stage3_prefetch_bucket_size", 1e6}}}}));
  Parsed b = parse_ok(with_batch({{"zero_optimization", {{"prefetch_bucket_size", 1e6}}}}));
  EXPECT_EQ(a.config.zero.prefetch_bucket_size, 1'000'000);
  EXPECT_EQ(b.config.zero.prefetch_bucket_size, 1'000'000);
  EXPECT_EQ(
      parse_error(with_batch({{"zero_optimization",
                               {{"stage3_max_live_parameters", 1}, {"max_live_parameters", 2}}}})),
      "test.json: zero_optimization.max_live_parameters: the same setting as "
      "stage3_max_live_parameters; give only one");
}

TEST(Defaults, AreDeepSpeedsCodeDefaults) {
  Parsed p = parse_ok(with_batch(json::object()));
  const DsConfig& c = p.config;
  EXPECT_EQ(c.gradient_clipping, 1.0);
  EXPECT_FALSE(c.steps_per_print.has_value());
  EXPECT_EQ(c.zero.stage, 0);
  EXPECT_FALSE(c.zero.overlap_comm);
  EXPECT_EQ(c.zero.prefetch_bucket_size, 50'000'000);
  EXPECT_EQ(c.zero.offload_param.buffer_count, 5);
  EXPECT_EQ(c.zero.offload_optimizer.buffer_count, 4);
  EXPECT_TRUE(c.zero.offload_param.pin_memory);
  EXPECT_EQ(c.zero.offload_param.device, OffloadDevice::kNone);
  EXPECT_TRUE(c.bf16.check_grad_overflow);
  EXPECT_EQ(c.optimizer.type, "AdamW");
  EXPECT_TRUE(c.scheduler.type.empty());
  EXPECT_EQ(c.model_dtype(), DType::kFp32);
}

TEST(Defaults, OverlapCommFollowsTheStage) {
  EXPECT_TRUE(
      parse_ok(with_batch({{"zero_optimization", {{"stage", 3}}}})).config.zero.overlap_comm);
  EXPECT_FALSE(
      parse_ok(with_batch({{"zero_optimization", {{"stage", 2}}}})).config.zero.overlap_comm);
  EXPECT_FALSE(
      parse_ok(with_batch({{"zero_optimization", {{"stage", 3}, {"overlap_comm", false}}}}))
          .config.zero.overlap_comm);
  EXPECT_TRUE(parse_ok(with_batch({{"zero_optimization", {{"stage", 1}, {"overlap_comm", true}}}}))
                  .config.zero.overlap_comm);
}

TEST(Deprecated, CpuOffloadMapsToOffloadOptimizer) {
  Parsed p = parse_ok(with_batch({{"zero_optimization", {{"stage", 2}, {"cpu_offload", true}}}}));
  EXPECT_EQ(p.config.zero.offload_optimizer.device, OffloadDevice::kCpu);
  EXPECT_EQ(p.config.zero.offload_param.device, OffloadDevice::kNone);
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_EQ(p.warnings[0],
            "test.json: zero_optimization.cpu_offload: deprecated; use "
            "zero_optimization.offload_optimizer {\"device\": \"cpu\"} (mapped)");
  Parsed off = parse_ok(with_batch({{"zero_optimization", {{"cpu_offload", false}}}}));
  EXPECT_EQ(off.config.zero.offload_optimizer.device, OffloadDevice::kNone);

  EXPECT_EQ(parse_error(with_batch(
                {{"zero_optimization",
                  {{"cpu_offload", true}, {"offload_optimizer", {{"device", "cpu"}}}}}})),
            "test.json: zero_optimization.cpu_offload: deprecated key and its replacement "
            "zero_optimization.offload_optimizer are both given; keep only offload_optimizer");
}

TEST(Deprecated, CpuOffloadParamAndPinMemory) {
  Parsed p = parse_ok(with_batch(
      {{"zero_optimization",
        {{"stage", 3}, {"cpu_offload_param", true}, {"cpu_offload_use_pin_memory", true}}}}));
  EXPECT_EQ(p.config.zero.offload_param.device, OffloadDevice::kCpu);
  EXPECT_EQ(p.config.zero.offload_param.buffer_count, 5);
  ASSERT_EQ(p.warnings.size(), 2u);
  EXPECT_EQ(p.warnings[1],
            "test.json: zero_optimization.cpu_offload_use_pin_memory: deprecated and ignored; set "
            "pin_memory in offload_param / offload_optimizer");
}

TEST(Deprecated, GatherFp16WeightsMapsTo16Bit) {
  Parsed p = parse_ok(
      with_batch({{"zero_optimization", {{"stage3_gather_fp16_weights_on_model_save", true}}}}));
  EXPECT_TRUE(p.config.zero.gather_16bit_weights_on_model_save);
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_EQ(p.warnings[0],
            "test.json: zero_optimization.stage3_gather_fp16_weights_on_model_save: deprecated; "
            "use zero_optimization.stage3_gather_16bit_weights_on_model_save (mapped)");
  EXPECT_EQ(parse_error(with_batch({{"zero_optimization",
                                     {{"stage3_gather_fp16_weights_on_model_save", true},
                                      {"stage3_gather_16bit_weights_on_model_save", false}}}})),
            "test.json: zero_optimization.stage3_gather_fp16_weights_on_model_save: deprecated key "
            "and its replacement zero_optimization.stage3_gather_16bit_weights_on_model_save are "
            "both given; keep only stage3_gather_16bit_weights_on_model_save");
}

TEST(Deprecated, BooleanZeroOptimizationMeansStage1) {
  Parsed p = parse_ok(with_batch({{"zero_optimization", true}, {"allgather_size", 2e8}}));
  EXPECT_EQ(p.config.zero.stage, 1);
  EXPECT_EQ(p.config.zero.allgather_bucket_size, 200'000'000);
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_EQ(p.warnings[0],
            "test.json: zero_optimization: deprecated boolean form; write {\"stage\": 1} (mapped)");
  EXPECT_EQ(parse_ok(with_batch({{"zero_optimization", false}})).config.zero.stage, 0);
}

TEST(Deprecated, Bfloat16IsTheLegacyNameOfBf16) {
  Parsed p = parse_ok(with_batch({{"bfloat16", {{"enabled", true}}}}));
  EXPECT_TRUE(p.config.bf16.enabled);
  EXPECT_EQ(p.config.model_dtype(), DType::kBf16);
  EXPECT_EQ(
      parse_error(with_batch({{"bfloat16", {{"enabled", true}}}, {"bf16", {{"enabled", true}}}})),
      "test.json: bfloat16: legacy name of bf16, and bf16 is given too; keep only bf16");
}

TEST(Assertions, DeepSpeedsCrossChecksAreKept) {
  EXPECT_EQ(parse_error(with_batch({{"fp16", {{"enabled", true}}}, {"bf16", {{"enabled", true}}}})),
            "test.json: bf16.enabled: bfloat16 and fp16 modes cannot be simultaneously enabled");
  EXPECT_EQ(parse_error(with_batch(
                {{"optimizer", {{"type", "Adam"}, {"params", {{"max_grad_norm", 1.0}}}}}})),
            "test.json: optimizer.params.max_grad_norm: not supported as an optimizer parameter; "
            "use the top-level gradient_clipping");
  EXPECT_EQ(parse_error(with_batch(
                {{"zero_optimization",
                  {{"stage", 2}, {"offload_optimizer", {{"device", "cpu"}, {"ratio", 0.5}}}}}})),
            "test.json: zero_optimization.offload_optimizer.ratio: Partial offloading only "
            "supported for ZeRO Stage 3.");
  EXPECT_EQ(parse_error(with_batch(
                {{"zero_optimization", {{"stage", 3}, {"offload_param", {{"device", "nvme"}}}}}})),
            "test.json: zero_optimization.offload_param.nvme_path: required when device is "
            "\"nvme\"");
  EXPECT_EQ(parse_error(with_batch(
                {{"fp16", {{"enabled", true}, {"fp16_master_weights_and_grads", true}}}})),
            "test.json: fp16.fp16_master_weights_and_grads: Fp16_master_weights_and_grads is only "
            "supported with ZeRO Stage 1, 2, or 3.");
  EXPECT_EQ(parse_error(with_batch(
                {{"zero_optimization", {{"stage", 2}}}, {"gradient_predivide_factor", 2.0}})),
            "test.json: gradient_predivide_factor: gradient_predivide_factor != 1.0 is not yet "
            "supported with ZeRO-2 with reduce scatter enabled");
  EXPECT_EQ(parse_error(with_batch(
                {{"zero_optimization", {{"stage", 3}}}, {"gradient_allreduce_op", "sum"}})),
            "test.json: gradient_allreduce_op: gradient_allreduce_op='sum' is not supported with "
            "ZeRO stage 3");
  EXPECT_EQ(parse_error(
                with_batch({{"zero_optimization", {{"stage", 1}}}, {"amp", {{"enabled", true}}}})),
            "test.json: amp: Amp and ZeRO are not currently compatible, please use (legacy) fp16 "
            "mode which performs similar to amp opt_mode=O2");
  // DeepSpeed's "requires number_checkpoints" is not kept: the trainer takes the model's layers.
  EXPECT_FALSE(parse_ok(with_batch({{"activation_checkpointing",
                                     {{"contiguous_memory_optimization", true},
                                      {"partition_activations", true}}}}))
                   .config.activation_checkpointing.number_checkpoints);
  EXPECT_EQ(parse_error(with_batch({{"zero_optimization", {{"legacy_stage1", true}}}})),
            "test.json: zero_optimization.legacy_stage1: the legacy stage 1 implementation was "
            "removed from DeepSpeed; remove the key");
  EXPECT_EQ(parse_error(with_batch({{"checkpoint", {{"tag_validation", "Wran"}}}})),
            "test.json: checkpoint.tag_validation: \"Wran\" is not one of \"Ignore\", \"Warn\", "
            "\"Fail\" (did you mean 'Warn'?)");
  EXPECT_EQ(parse_ok(with_batch({{"checkpoint", {{"tag_validation", "FAIL"}}}}))
                .config.checkpoint.tag_validation,
            "FAIL");
}

// The seed's compression block as written; PowerSGD only where the whole gradient is all-reduced.
TEST(CompressionConfig, PowerSgdBlockIsReadAndCheckedPerStage) {
  const nlohmann::json block = {
      {"type", "powerSGD"},
      {"params", {{"matrix_approximation_rank", 2}, {"start_compressing_after_step", 1000}}}};
  const auto parsed = parse_ok(with_batch({{"compression", block}})).config.compression;
  EXPECT_TRUE(parsed.enabled());
  EXPECT_EQ(parsed.matrix_approximation_rank, 2);
  EXPECT_EQ(parsed.start_compressing_after_step, 1000);
  EXPECT_EQ(parsed.min_compression_rate, 2.0);  // PyTorch's PowerSGDState default
  EXPECT_FALSE(parse_ok(with_batch(nlohmann::json::object())).config.compression.enabled());
  EXPECT_TRUE(parse_ok(with_batch({{"zero_optimization", {{"stage", 1}}}, {"compression", block}}))
                  .config.compression.enabled());
  EXPECT_EQ(
      parse_error(with_batch({{"zero_optimization", {{"stage", 2}}}, {"compression", block}})),
      "test.json: compression: PowerSGD compresses the all-reduce of the whole gradient: "
      "ZeRO stages 0 and 1 only, not stage 2 (which reduce-scatters it)");
  EXPECT_EQ(parse_error(with_batch({{"compression", {{"params", block["params"]}}}})),
            "test.json: compression.type: required: the compression method (\"powerSGD\")");
  EXPECT_NE(
      parse_error(with_batch({{"compression", {{"type", "onebit"}}}})).find("compression.type"),
      std::string::npos);
  EXPECT_NE(parse_error(with_batch({{"compression",
                                     {{"type", "powerSGD"}, {"params", {{"matrix_rank", 2}}}}}}))
                .find("compression.params.matrix_rank"),
            std::string::npos);
  EXPECT_EQ(parse_error(with_batch({{"compression", block}, {"communication_data_type", "bf16"}})),
            "test.json: communication_data_type: PowerSGD (compression) all-reduces fp32 P and Q "
            "matrices; set \"fp32\" or leave it out");
}

TEST(Optimizer, TypesAreMatchedAsDeepSpeedDoes) {
  EXPECT_EQ(parse_ok(with_batch({{"optimizer", {{"type", "adamw"}}}})).config.optimizer.type,
            "AdamW");
  EXPECT_EQ(parse_ok(with_batch({{"optimizer", {{"type", "ADAM"}}}})).config.optimizer.type,
            "Adam");
  // Other optimizers: recognised, their parameters passed on unchecked.
  Parsed lamb = parse_ok(with_batch(
      {{"optimizer", {{"type", "lamb"}, {"params", {{"lr", 0.01}, {"max_coeff", 0.3}}}}}}));
  EXPECT_EQ(lamb.config.optimizer.type, "Lamb");
  EXPECT_EQ(lamb.config.optimizer.lr, 0.01);
  EXPECT_EQ(
      parse_ok(with_batch({{"optimizer", {{"type", "SGD"}, {"params", {{"momentum", 0.9}}}}}}))
          .config.optimizer.type,
      "SGD");
  EXPECT_EQ(parse_error(with_batch({{"optimizer", {{"type", "Adma"}}}})),
            "test.json: optimizer.type: unknown optimizer \"Adma\" (did you mean 'Adam'?)");
  // Adam's parameters are checked strictly.
  EXPECT_EQ(parse_error(with_batch(
                {{"optimizer", {{"type", "AdamW"}, {"params", {{"beta", {0.9, 0.99}}}}}}})),
            "test.json: optimizer.params.beta: unknown key (did you mean 'betas'?)");
  EXPECT_EQ(
      parse_error(with_batch({{"optimizer", {{"type", "AdamW"}, {"params", {{"betas", {0.9}}}}}}})),
      "test.json: optimizer.params.betas: expected a list of 2 numbers, found a list [0.9]");
}

TEST(Optimizer, AbsentOptimizerIsAdamWFromTheTrainValues) {
  ResolveContext ctx = context();
  ctx.train.lr = 3e-4;
  ctx.train.weight_decay = 0.1;
  Parsed p = parse_ok(with_batch(json::object()), ctx);
  EXPECT_EQ(p.config.optimizer.type, "AdamW");
  EXPECT_EQ(p.config.optimizer.lr, 3e-4);
  EXPECT_EQ(p.config.optimizer.weight_decay, 0.1);
}

TEST(Scheduler, ParametersAreCheckedPerType) {
  Parsed p = parse_ok(with_batch(
      {{"scheduler",
        {{"type", "WarmupDecayLR"},
         {"params",
          {{"warmup_num_steps", 10}, {"total_num_steps", 100}, {"warmup_type", "linear"}}}}}}));
  EXPECT_EQ(p.config.scheduler.type, "WarmupDecayLR");
  EXPECT_EQ(p.config.scheduler.total_num_steps, 100);
  EXPECT_EQ(p.config.scheduler.warmup_type, "linear");
  EXPECT_FALSE(p.config.scheduler.warmup_max_lr.has_value());

  EXPECT_EQ(parse_error(with_batch(
                {{"scheduler", {{"type", "WarmupLR"}, {"params", {{"total_num_steps", 10}}}}}})),
            "test.json: scheduler.params.total_num_steps: unknown key");
  EXPECT_EQ(parse_error(with_batch(
                {{"scheduler", {{"type", "WarmupDecayLR"}, {"params", json::object()}}}})),
            "test.json: scheduler.params.total_num_steps: required for WarmupDecayLR");
  EXPECT_EQ(parse_error(with_batch(
                {{"scheduler", {{"type", "OneCycle"}, {"params", {{"cycle_max_lr", 1}}}}}})),
            "test.json: scheduler.params.cycle_min_lr: required for OneCycle");
  EXPECT_EQ(parse_error(with_batch({{"scheduler", {{"type", "WarmupLr"}}}})),
            "test.json: scheduler.type: unknown scheduler \"WarmupLr\" (did you mean 'WarmupLR'?)");
  EXPECT_EQ(
      parse_error(with_batch(
          {{"scheduler", {{"type", "WarmupLR"}, {"params", {{"warmup_type", "cosine"}}}}}})),
      "test.json: scheduler.params.warmup_type: \"cosine\" is not one of \"log\", \"linear\"");
  // torch schedulers are recognised by name.
  EXPECT_EQ(
      parse_ok(with_batch({{"scheduler", {{"type", "StepLR"}, {"params", {{"step_size", 5}}}}}}))
          .config.scheduler.type,
      "StepLR");
}

TEST(Errors, EveryErrorOfTheFileIsReportedOnce) {
  std::string message =
      parse_error({{"train_batch_size", 8},
                   {"zero_optimization", {{"stage", 7}, {"reduce_bucket_sise", 1}}},
                   {"fp16", {{"enabled", "yes"}}},
                   {"gradient_clipping", "1.0"}});
  std::vector<std::string> lines = strings::split(message, '\n');
  ASSERT_EQ(lines.size(), 4u) << message;
  EXPECT_EQ(lines[0].rfind("test.json: gradient_clipping: expected a number", 0), 0u) << message;
  EXPECT_EQ(lines[1].rfind("test.json: zero_optimization.stage: 7 is out of range", 0), 0u);
  EXPECT_EQ(lines[2].rfind("test.json: zero_optimization.reduce_bucket_sise: unknown key", 0), 0u);
  EXPECT_EQ(lines[3].rfind("test.json: fp16.enabled: expected a boolean", 0), 0u);
}

}  // namespace keys_test
}  // namespace deepshard::config

namespace deepshard::config {
namespace keys_test {

using namespace deepshard::config::testing;

// Stage 3 reduces each unit's gradients whole: a reduce_bucket_size given there changes nothing
// and says so; at stages 0-2 it sizes the buckets silently.
TEST(ZeroKeys, ReduceBucketSizeGivenAtStage3Warns) {
  const auto warned =
      parse_ok(with_batch({{"zero_optimization", {{"stage", 3}, {"reduce_bucket_size", 1e6}}}}));
  ASSERT_EQ(warned.warnings.size(), 1u);
  EXPECT_NE(warned.warnings[0].find("zero_optimization.reduce_bucket_size: 1000000 is accepted "
                                    "but ignored at stage 3"),
            std::string::npos)
      << warned.warnings[0];
  for (int stage : {0, 1, 2}) {
    const auto p = parse_ok(
        with_batch({{"zero_optimization", {{"stage", stage}, {"reduce_bucket_size", 1e6}}}}));
    EXPECT_TRUE(p.warnings.empty()) << stage;
    EXPECT_EQ(p.config.zero.reduce_bucket_size, 1'000'000);
  }
  EXPECT_TRUE(parse_ok(with_batch({{"zero_optimization", {{"stage", 3}}}})).warnings.empty());
}

// allgather_size is read only by the legacy boolean form; anywhere else it warns.
TEST(ZeroKeys, AllgatherSizeOutsideTheBooleanFormWarns) {
  const auto p =
      parse_ok(with_batch({{"zero_optimization", {{"stage", 1}}}, {"allgather_size", 1e6}}));
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_NE(p.warnings[0].find("allgather_size: accepted but ignored"), std::string::npos)
      << p.warnings[0];
  EXPECT_EQ(p.config.zero.allgather_bucket_size, 500'000'000);
}

// log_level takes DeepSpeed's level names; anything else is an error naming the key.
TEST(TopLevelKeys, LogLevelTakesDeepSpeedsNames) {
  EXPECT_EQ(parse_ok(with_batch({{"log_level", "error"}})).config.log_level, "error");
  EXPECT_NE(parse_error(with_batch({{"log_level", "loud"}})).find("test.json: log_level: "),
            std::string::npos);
}

}  // namespace keys_test
}  // namespace deepshard::config
