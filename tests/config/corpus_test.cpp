// The real DeepSpeed configs of tests/data/ds_configs (see SOURCES.md there), each parsed under two
// stated contexts: a Hugging-Face-style run (world 2, micro batch 4, lr 1e-3, warmup 10, steps
// 100) and a bare DeepSpeed launch (world 2, no train values). Every file has an exact expected
// outcome per context: the parsed values and the unsupported-features list, or the exact errors.
#include <gtest/gtest.h>

#include <filesystem>

#include "config/config_test_helpers.h"
#include "support/test_support.h"
#include "util/strings.h"

namespace deepshard::config {
namespace corpus_test {

using namespace deepshard::config::testing;
using nlohmann::json;

const std::string kDir = deepshard::testing::source_dir() + "/tests/data/ds_configs/";

ResolveContext hf_run(const std::string& file) {
  ResolveContext c = context(2);
  c.origin = file;
  c.train.micro_batch_size = 4;
  c.train.lr = 1e-3;
  c.train.warmup_steps = 10;
  c.train.steps = 100;
  return c;
}

ResolveContext bare(const std::string& file) {
  ResolveContext c = context(2);
  c.origin = file;
  return c;
}

Outcome load(const std::string& file, const ResolveContext& ctx) {
  return load_outcome(kDir + file, ctx);
}

using Lines = std::vector<std::string>;

TEST(Corpus, EveryFileIsCovered) {
  EXPECT_EQ(json_files_in(kDir),
            Lines({"dsexamples_autotuning_fp16_z3.json", "dsexamples_cifar.json",
                   "dsexamples_megatron_zero2_offload.json", "transformers_zero2_auto.json",
                   "transformers_zero3.json"}));
}

TEST(Corpus, AutotuningFp16Z3) {
  const std::string f = "dsexamples_autotuning_fp16_z3.json";
  Outcome run = load(f, hf_run(f));
  ASSERT_TRUE(run.errors.empty()) << run.errors.front();
  EXPECT_EQ(run.config.train_micro_batch_size_per_gpu, 4);
  EXPECT_EQ(run.config.gradient_accumulation_steps, 1);
  EXPECT_EQ(run.config.train_batch_size, 8);
  EXPECT_EQ(run.config.zero.stage, 3);
  EXPECT_TRUE(run.config.zero.overlap_comm);  // absent: true at stage 3
  EXPECT_TRUE(run.config.fp16.dynamic());
  EXPECT_EQ(run.config.fp16.loss_scale_window, 1000);
  EXPECT_EQ(run.config.optimizer.type, "AdamW");  // no optimizer: AdamW from train.lr
  EXPECT_EQ(run.config.optimizer.lr, 1e-3);
  EXPECT_TRUE(run.warnings.empty());
  EXPECT_TRUE(run.unsupported.empty());  // stage 3 runs

  EXPECT_EQ(load(f, bare(f)).errors,
            Lines({f + ": train_micro_batch_size_per_gpu: \"auto\" cannot be resolved: set "
                       "train.micro_batch_size in the run file or give a number"}));
}

TEST(Corpus, Cifar) {
  const std::string f = "dsexamples_cifar.json";
  Outcome plain = load(f, bare(f));
  ASSERT_TRUE(plain.errors.empty()) << plain.errors.front();
  const DsConfig& c = plain.config;
  EXPECT_EQ(c.train_batch_size, 4);
  EXPECT_EQ(c.train_micro_batch_size_per_gpu, 2);
  EXPECT_EQ(c.gradient_accumulation_steps, 1);
  EXPECT_EQ(c.steps_per_print, 2000);
  EXPECT_EQ(c.zero.stage, 2);
  EXPECT_EQ(c.zero.reduce_bucket_size, 50'000'000);
  EXPECT_EQ(c.zero.allgather_bucket_size, 50'000'000);
  EXPECT_TRUE(c.zero.overlap_comm);
  EXPECT_EQ(c.zero.offload_optimizer.device, OffloadDevice::kCpu);  // from cpu_offload
  EXPECT_EQ(c.fp16.loss_scale_window, 500);
  EXPECT_EQ(c.fp16.initial_scale_power, 15);
  EXPECT_TRUE(c.fp16.fp16_master_weights_and_grads);
  EXPECT_EQ(c.optimizer.type, "Adam");
  EXPECT_EQ(c.optimizer.betas[0], 0.8);
  EXPECT_EQ(c.optimizer.weight_decay, 3e-7);
  EXPECT_EQ(c.scheduler.type, "WarmupLR");
  EXPECT_EQ(c.scheduler.warmup_num_steps, 1000);
  EXPECT_EQ(c.scheduler.warmup_max_lr, 0.001);
  EXPECT_EQ(plain.warnings,
            Lines({f + ": zero_optimization.cpu_offload: deprecated; use "
                       "zero_optimization.offload_optimizer {\"device\": \"cpu\"} (mapped)"}));
  EXPECT_EQ(plain.unsupported, Lines({"not supported yet: fp16.fp16_master_weights_and_grads"}));

  // The run's micro batch 4 on 2 ranks cannot make train_batch_size 4; its warmup differs.
  EXPECT_EQ(load(f, hf_run(f)).errors,
            Lines({f + ": scheduler.params.warmup_num_steps: 1000 contradicts train.warmup_steps = "
                       "10 (write \"auto\" or make them equal)",
                   f + ": gradient_accumulation_steps: Gradient accumulation steps: 0 has to be "
                       "greater than 0"}));
}

TEST(Corpus, MegatronZero2Offload) {
  const std::string f = "dsexamples_megatron_zero2_offload.json";
  Outcome plain = load(f, bare(f));
  ASSERT_TRUE(plain.errors.empty()) << plain.errors.front();
  EXPECT_EQ(plain.config.train_batch_size, 16);
  EXPECT_EQ(plain.config.train_micro_batch_size_per_gpu, 8);
  EXPECT_EQ(plain.config.gradient_accumulation_steps, 1);
  EXPECT_EQ(plain.config.zero.stage, 2);
  EXPECT_FALSE(plain.config.zero.overlap_comm);
  EXPECT_EQ(plain.config.optimizer.lr, 0.00015);
  EXPECT_EQ(plain.config.gradient_clipping, 1.0);
  EXPECT_TRUE(plain.config.activation_checkpointing.partition_activations);
  EXPECT_TRUE(plain.unsupported.empty());  // offload and activation partitioning run

  EXPECT_EQ(load(f, hf_run(f)).errors,
            Lines({f + ": optimizer.params.lr: 0.00015 contradicts train.lr = 0.001 (write "
                       "\"auto\" or make them equal)",
                   f + ": train_batch_size: Check batch related parameters. train_batch_size is "
                       "not equal to micro_batch_per_gpu * gradient_acc_step * world_size 16 != 4 "
                       "* 1 * 2"}));
}

TEST(Corpus, TransformersZero2Auto) {
  const std::string f = "transformers_zero2_auto.json";
  Outcome run = load(f, hf_run(f));
  ASSERT_TRUE(run.errors.empty()) << run.errors.front();
  const DsConfig& c = run.config;
  EXPECT_EQ(c.train_batch_size, 8);
  EXPECT_EQ(c.train_micro_batch_size_per_gpu, 4);
  EXPECT_EQ(c.gradient_accumulation_steps, 1);
  EXPECT_EQ(c.gradient_clipping, 1.0);
  EXPECT_FALSE(c.fp16.enabled);
  EXPECT_FALSE(c.bf16.enabled);
  EXPECT_EQ(c.fp16.loss_scale_window, 1000);
  EXPECT_EQ(c.optimizer.lr, 1e-3);
  EXPECT_EQ(c.optimizer.betas[1], 0.999);
  EXPECT_EQ(c.optimizer.eps, 1e-8);
  EXPECT_EQ(c.optimizer.weight_decay, 0.0);
  EXPECT_EQ(c.scheduler.warmup_min_lr, 0.0);
  EXPECT_EQ(c.scheduler.warmup_max_lr, 1e-3);
  EXPECT_EQ(c.scheduler.warmup_num_steps, 10);
  EXPECT_EQ(c.zero.reduce_bucket_size, 200'000'000);
  EXPECT_EQ(c.zero.allgather_bucket_size, 200'000'000);
  EXPECT_TRUE(run.warnings.empty());
  EXPECT_TRUE(run.unsupported.empty());  // offload_optimizer cpu runs

  auto unresolved = [&](const std::string& key, const std::string& source) {
    return f + ": " + key + ": \"auto\" cannot be resolved: set " + source +
           " in the run file or give a number";
  };
  EXPECT_EQ(load(f, bare(f)).errors,
            Lines({unresolved("optimizer.params.lr", "train.lr"),
                   unresolved("scheduler.params.warmup_max_lr", "train.lr"),
                   unresolved("scheduler.params.warmup_num_steps", "train.warmup_steps"),
                   unresolved("train_micro_batch_size_per_gpu", "train.micro_batch_size")}));
}

TEST(Corpus, TransformersZero3) {
  const std::string f = "transformers_zero3.json";
  ResolveContext ctx = bare(f);
  ctx.train.micro_batch_size = 4;  // the run gives the batch size the file leaves out
  Outcome run = load(f, ctx);
  ASSERT_TRUE(run.errors.empty()) << run.errors.front();
  const ZeroConfig& z = run.config.zero;
  EXPECT_EQ(run.config.train_batch_size, 8);
  EXPECT_EQ(z.stage, 3);
  EXPECT_EQ(z.sub_group_size, 100'000'000'000'000);
  EXPECT_EQ(z.reduce_bucket_size, 0);
  EXPECT_EQ(z.prefetch_bucket_size, 0);
  EXPECT_EQ(z.param_persistence_threshold, 0);
  EXPECT_EQ(z.max_live_parameters, 1'000'000'000);
  EXPECT_EQ(z.max_reuse_distance, 1'000'000'000);
  EXPECT_TRUE(z.gather_16bit_weights_on_model_save);
  EXPECT_EQ(z.offload_param.device, OffloadDevice::kCpu);
  EXPECT_EQ(z.offload_optimizer.device, OffloadDevice::kCpu);
  EXPECT_EQ(run.config.optimizer.lr, 3e-5);
  EXPECT_EQ(run.config.scheduler.warmup_num_steps, 500);
  EXPECT_EQ(
      run.warnings,
      Lines({f + ": zero_optimization.stage3_gather_fp16_weights_on_model_save: deprecated; "
                 "use zero_optimization.stage3_gather_16bit_weights_on_model_save (mapped)",
             f + ": zero_optimization.reduce_bucket_size: 0 is accepted but ignored at stage 3: "
                 "each unit's gradients are reduce-scattered whole when the unit's backward ends "
                 "(the unit is the bucket)"}));
  EXPECT_TRUE(run.unsupported.empty());  // offload_optimizer and offload_param cpu run

  EXPECT_EQ(load(f, bare(f)).errors,
            Lines({f + ": train_batch_size: Either train_batch_size or "
                       "train_micro_batch_size_per_gpu needs to be provided"}));
  EXPECT_EQ(load(f, hf_run(f)).errors,
            Lines({f + ": optimizer.params.lr: 3e-05 contradicts train.lr = 0.001 (write \"auto\" "
                       "or make them equal)",
                   f + ": scheduler.params.warmup_num_steps: 500 contradicts train.warmup_steps = "
                       "10 (write \"auto\" or make them equal)"}));
}

}  // namespace corpus_test
}  // namespace deepshard::config
