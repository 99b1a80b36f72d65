// unsupported_features: what the engine cannot run yet (today: only ZeRO stage 0 in fp32 with
// Adam/AdamW, the five DeepSpeed schedules, accumulation and clipping), and the harmless keys it
// accepts.
#include <gtest/gtest.h>

#include "config/config_test_helpers.h"

namespace deepshard::config {
namespace support_test {

using namespace deepshard::config::testing;
using nlohmann::json;

std::vector<std::string> unsupported(const json& extra) {
  return unsupported_features(parse_ok(with_batch(extra)).config);
}

// The rank grid's sections are read (parallel_section.cpp). A pipeline trains at ZeRO stages 0
// and 1 in fp32 (stages 2 and 3 are refused naming zero_optimization.stage, as DeepSpeed does);
// tensor parallelism runs with every ZeRO stage in fp32; each is refused naming the key it meets
// otherwise. A present section without "enabled" counts as enabled (as
// DeepSpeed's opaque sections did), so {"stages": 2} is not silently a single stage.
TEST(Unsupported, PipelineAndTensorSizesAboveOne) {
  auto refused = [](const json& extra) {
    return unsupported_features(parse_ok(with_batch(extra), context(2)).config);
  };
  EXPECT_TRUE(refused({{"pipeline", {{"stages", 2}}}}).empty());
  EXPECT_TRUE(
      refused({{"pipeline", {{"stages", 2}}}, {"zero_optimization", {{"stage", 1}}}}).empty());
  // Every ZeRO stage shards each pipeline stage over its data-parallel group (docs/parallel.md).
  for (int stage : {2, 3}) {
    EXPECT_TRUE(
        refused({{"pipeline", {{"stages", 2}}}, {"zero_optimization", {{"stage", stage}}}}).empty())
        << stage;
  }
  // Mixed precision trains with either axis (docs/parallel.md, "Mixed precision").
  for (const char* precision : {"bf16", "fp16"}) {
    EXPECT_TRUE(refused({{"pipeline", {{"stages", 2}}}, {precision, {{"enabled", true}}}}).empty())
        << precision;
    EXPECT_TRUE(
        refused({{"tensor_parallel", {{"size", 2}}}, {precision, {{"enabled", true}}}}).empty())
        << precision;
  }
  const json tp = {{"enabled", true}, {"size", 2}};
  EXPECT_TRUE(refused({{"tensor_parallel", tp}}).empty());
  EXPECT_TRUE(refused({{"tensor_parallel", tp}, {"zero_optimization", {{"stage", 1}}}}).empty());
  EXPECT_TRUE(refused({{"tensor_parallel", tp}, {"zero_optimization", {{"stage", 2}}}}).empty());
  EXPECT_TRUE(refused({{"tensor_parallel", tp}, {"zero_optimization", {{"stage", 3}}}}).empty());
  EXPECT_TRUE(refused({{"tensor_parallel", {{"enabled", false}, {"size", 2}}}}).empty());
  EXPECT_TRUE(refused({{"pipeline", {{"enabled", true}, {"stages", 1}}}}).empty());
}

TEST(Unsupported, PlainStage0Fp32IsRunnable) {
  EXPECT_TRUE(unsupported(json::object()).empty());
  for (const char* scheduler : {"WarmupLR", "WarmupCosineLR", "LRRangeTest"}) {
    json s = {{"scheduler", {{"type", scheduler}}}};
    if (std::string(scheduler) == "WarmupCosineLR")
      s["scheduler"]["params"]["total_num_steps"] = 10;
    EXPECT_TRUE(unsupported(s).empty()) << scheduler;
  }
  EXPECT_TRUE(unsupported({{"optimizer", {{"type", "Adam"}, {"params", {{"adam_w_mode", false}}}}},
                           {"gradient_accumulation_steps", 2},
                           {"train_batch_size", 16},
                           {"gradient_clipping", 0.5},
                           {"communication_data_type", "fp32"},
                           {"data_types", {{"grad_accum_dtype", "fp32"}}}})
                  .empty());
  for (const char* wire : {"fp16", "bf16"}) {
    EXPECT_TRUE(unsupported({{"communication_data_type", wire},
                             {"prescale_gradients", true},
                             {"gradient_predivide_factor", 8}})
                    .empty())
        << wire;
  }
}

TEST(Unsupported, HarmlessTuningKeysAreAccepted) {
  EXPECT_TRUE(unsupported({{"steps_per_print", 10},
                           {"wall_clock_breakdown", true},
                           {"dataloader_drop_last", true},
                           {"zero_optimization",
                            {{"allgather_partitions", false},
                             {"overlap_comm", true},
                             {"reduce_bucket_size", 1e6},
                             {"contiguous_gradients", false},
                             {"stage3_prefetch_bucket_size", 1e6},
                             {"stage3_max_live_parameters", 1e6},
                             {"offload_optimizer", {{"device", "none"}, {"pin_memory", false}}}}},
                           {"aio", {{"block_size", 4096}}},
                           {"checkpoint", {{"tag_validation", "Fail"}}},
                           {"fp16", {{"enabled", false}, {"loss_scale_window", 100}}},
                           {"amp", {{"enabled", false}}}})
                  .empty());
}

TEST(Unsupported, EachFeatureIsNamedWithItsValue) {
  struct Case {
    json config;
    std::string message;
  };
  const Case cases[] = {
      {{{"zero_optimization", {{"zeropp_loco_param", {{"err_beta", 0.8}}}}}},
       "zero_optimization.zeropp_loco_param"},
      {{{"fp16", {{"enabled", true}, {"fp16_master_weights_and_grads", true}}},
        {"zero_optimization", {{"stage", 1}}}},
       "fp16.fp16_master_weights_and_grads"},
      {{{"bf16", {{"enabled", true}, {"bf16_master_weights_and_grads", true}}},
        {"zero_optimization", {{"stage", 1}}}},
       "bf16.bf16_master_weights_and_grads"},
      {{{"torch_autocast", {{"enabled", true}, {"dtype", "bfloat16"}}}}, "torch_autocast.enabled"},
      {{{"data_types", {{"grad_accum_dtype", "bf16"}}}}, "data_types.grad_accum_dtype=bf16"},
      {{{"gradient_allreduce_op", "sum"}}, "gradient_allreduce_op=sum"},
      {{{"sparse_gradients", true}}, "sparse_gradients"},
      {{{"optimizer", {{"type", "Lamb"}}}}, "optimizer.type=Lamb"},
      {{{"optimizer", {{"type", "Adam"}, {"params", {{"amsgrad", true}}}}}},
       "optimizer.params.amsgrad"},
      {{{"scheduler", {{"type", "StepLR"}}}}, "scheduler.type=StepLR"},
      {{{"wandb", {{"enabled", true}}}},
       "wandb.enabled=true (Weights & Biases is a network service; use tensorboard or "
       "csv_monitor)"},
      {{{"comet", {{"enabled", true}}}},
       "comet.enabled=true (Comet is a network service; use tensorboard or csv_monitor)"},
      {{{"comms_logger", {{"enabled", true}, {"debug", true}}}},
       "comms_logger.debug=true (caller function names)"},
      {{{"flops_profiler", {{"enabled", true}, {"recompute_fwd_factor", 1}}}},
       "flops_profiler.recompute_fwd_factor=1"},
      {{{"checkpoint", {{"load_universal", true}}}}, "checkpoint.load_universal"},
      {{{"elasticity", {{"enabled", true}, {"max_train_batch_size", 64}}}}, "elasticity"},
      {{{"amp", {{"enabled", true}, {"opt_level", "O1"}}}}, "amp"},
      {{{"sparse_attention", {{"mode", "fixed"}}}}, "sparse_attention"},
      {{{"checkpoint", {{"writer", {{"type", "fast"}}}}}}, "checkpoint.writer"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(unsupported(c.config), std::vector<std::string>({"not supported yet: " + c.message}))
        << c.config.dump();
  }
}

TEST(Unsupported, OffloadIsSupported) {
  // offload_optimizer cpu/nvme at stages 1-3, offload_param cpu/nvme at stage 3 (docs/offload.md).
  for (const char* device : {"cpu", "nvme"}) {
    EXPECT_TRUE(unsupported({{"zero_optimization",
                              {{"stage", 3},
                               {"offload_optimizer", {{"device", device}, {"nvme_path", "/x"}}},
                               {"offload_param", {{"device", device}, {"nvme_path", "/x"}}}}}})
                    .empty())
        << device;
  }
}

TEST(Unsupported, StagesZeroToThreeAreSupported) {
  for (int stage : {0, 1, 2, 3}) {
    EXPECT_TRUE(unsupported({{"zero_optimization", {{"stage", stage}}}}).empty()) << stage;
  }
}

TEST(Unsupported, ActivationCheckpointingIsSupported) {
  EXPECT_TRUE(unsupported({{"activation_checkpointing",
                            {{"partition_activations", true},
                             {"contiguous_memory_optimization", true},
                             {"cpu_checkpointing", true},
                             {"number_checkpoints", 4},
                             {"synchronize_checkpoint_boundary", true},
                             {"profile", true}}}})
                  .empty());
}

TEST(Unsupported, AllFeaturesOfAConfigAreListed) {
  EXPECT_EQ(unsupported({{"sparse_gradients", true},
                         {"zero_optimization", {{"stage", 1}}},  // DeepSpeed's rule for the next
                         {"bf16", {{"enabled", true}, {"bf16_master_weights_and_grads", true}}},
                         {"wandb", {{"enabled", true}}}}),
            std::vector<std::string>({"not supported yet: bf16.bf16_master_weights_and_grads",
                                      "not supported yet: sparse_gradients",
                                      "not supported yet: wandb.enabled=true (Weights & Biases "
                                      "is a network service; use tensorboard or csv_monitor)"}));
}

TEST(Unsupported, MonitorsAndProfilersAreSupported) {
  EXPECT_TRUE(unsupported({{"tensorboard", {{"enabled", true}}},
                           {"csv_monitor", {{"enabled", true}}},
                           {"comms_logger", {{"enabled", true}, {"verbose", true}}},
                           {"flops_profiler", {{"enabled", true}, {"profile_step", 2}}}})
                  .empty());
}

}  // namespace support_test
}  // namespace deepshard::config
