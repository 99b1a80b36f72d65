// The seed's configs of tests/data/seed_configs (written down from the project's issue texts, see
// SOURCES.md there): what deepshard makes of each file today, exactly. A change that makes one of
// them run (offload, activation checkpointing, compression, 3D parallelism) updates its expected
// outcome here. Context: a run that supplies micro batch 4, data-parallel world size 2.
#include <gtest/gtest.h>

#include <filesystem>

#include "config/config_test_helpers.h"
#include "support/test_support.h"

namespace deepshard::config {
namespace seed_configs_test {

using namespace deepshard::config::testing;
using Lines = std::vector<std::string>;

const std::string kDir = deepshard::testing::source_dir() + "/tests/data/seed_configs/";

Outcome load(const std::string& file, int64_t world_size = 2) {
  ResolveContext c = context(world_size);
  c.origin = file;
  c.train.micro_batch_size = 4;
  return load_outcome(kDir + file, c);
}

TEST(SeedConfigs, EveryFileIsCovered) {
  EXPECT_EQ(json_files_in(kDir),
            Lines({"activation_checkpointing.json", "compression_powersgd.json",
                   "finetune_20b.json", "hybrid_3d.json", "zero3_offload.json"}));
}

TEST(SeedConfigs, Zero3Offload) {
  Outcome o = load("zero3_offload.json");
  ASSERT_TRUE(o.errors.empty()) << o.errors.front();
  const ZeroConfig& z = o.config.zero;
  EXPECT_EQ(z.stage, 3);
  EXPECT_EQ(z.offload_optimizer.device, OffloadDevice::kCpu);
  EXPECT_TRUE(z.offload_optimizer.pin_memory);
  EXPECT_EQ(z.offload_param.device, OffloadDevice::kCpu);
  EXPECT_TRUE(z.offload_param.pin_memory);
  EXPECT_EQ(z.prefetch_bucket_size, 500'000'000);
  EXPECT_EQ(z.param_persistence_threshold, 1'000'000);
  EXPECT_EQ(o.config.train_batch_size, 8);
  EXPECT_TRUE(o.warnings.empty());
  EXPECT_TRUE(o.unsupported.empty());  // runs (offload)
}

TEST(SeedConfigs, Finetune20b) {
  Outcome o = load("finetune_20b.json");
  ASSERT_TRUE(o.errors.empty()) << o.errors.front();
  const DsConfig& c = o.config;
  EXPECT_EQ(c.train_batch_size, 16);
  EXPECT_EQ(c.gradient_accumulation_steps, 2);
  EXPECT_EQ(c.train_micro_batch_size_per_gpu, 4);
  EXPECT_TRUE(c.fp16.enabled);
  EXPECT_EQ(c.optimizer.type, "AdamW");
  EXPECT_EQ(c.optimizer.lr, 5e-5);
  EXPECT_EQ(c.optimizer.weight_decay, 0.1);
  EXPECT_EQ(c.zero.stage, 3);
  EXPECT_EQ(c.zero.offload_optimizer.device, OffloadDevice::kCpu);
  EXPECT_TRUE(o.warnings.empty());
  EXPECT_TRUE(o.unsupported.empty());  // runs (offload)
}

// DeepSpeed asserts contiguous_memory_optimization => number_checkpoints given
// (docs/deepspeed-behavior.md §7); the example as the issue describes it has none, and deepshard's
// trainer sizes the buffer from the model's layers instead (docs/activation.md): it runs.
TEST(SeedConfigs, ActivationCheckpointing) {
  Outcome o = load("activation_checkpointing.json");
  ASSERT_TRUE(o.errors.empty()) << o.errors.front();
  EXPECT_TRUE(o.config.activation_checkpointing.contiguous_memory_optimization);
  EXPECT_FALSE(o.config.activation_checkpointing.number_checkpoints);
  EXPECT_TRUE(o.warnings.empty());
  EXPECT_TRUE(o.unsupported.empty());
}

// PowerSGD at stage 0 (the file sets no stage), as written.
TEST(SeedConfigs, CompressionPowerSgd) {
  Outcome o = load("compression_powersgd.json");
  ASSERT_TRUE(o.errors.empty()) << o.errors.front();
  EXPECT_EQ(o.config.compression.type, "powerSGD");
  EXPECT_EQ(o.config.compression.matrix_approximation_rank, 2);
  EXPECT_EQ(o.config.compression.start_compressing_after_step, 1000);
  EXPECT_TRUE(o.warnings.empty());
  EXPECT_TRUE(o.unsupported.empty());
}

// Pipeline 4 x tensor 2 spans 8 ranks per replica (docs/parallel.md): on 8 ranks (data-parallel
// size 1) it resolves with nothing refused (ZeRO stage 3 inside the pipeline stages, which
// DeepSpeed refuses); on 2 ranks the layout itself is an error naming the key.
TEST(SeedConfigs, Hybrid3d) {
  Outcome o = load("hybrid_3d.json", 8);
  ASSERT_TRUE(o.errors.empty()) << o.errors.front();
  EXPECT_EQ(o.config.zero.stage, 3);
  EXPECT_EQ(o.config.train_batch_size, 4);  // micro 4 x data-parallel size 1
  EXPECT_TRUE(o.warnings.empty());
  // ZeRO stage 3 with CPU offload inside the tensor-parallel pipeline stages: nothing refused.
  EXPECT_TRUE(o.unsupported.empty()) << o.unsupported.front();
  Outcome two = load("hybrid_3d.json", 2);
  ASSERT_EQ(two.errors.size(), 1u);
  EXPECT_NE(two.errors[0].find("pipeline.stages: the job's 2 ranks are not divisible by pipeline "
                               "stages (4) x tensor size (2)"),
            std::string::npos)
      << two.errors[0];
}

}  // namespace seed_configs_test
}  // namespace deepshard::config
