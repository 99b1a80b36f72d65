// Run files: the model/data/train/comm sections with the same strictness as DeepSpeed keys, model
// presets, "auto" filled from the train section, and the resolved JSON of the whole run.
#include <gtest/gtest.h>

#include <filesystem>

#include "config/config_test_helpers.h"
#include "models/registry.h"
#include "support/test_support.h"
#include "util/strings.h"

namespace deepshard::config {
namespace run_config_test {

using deepshard::testing::TempDir;
using deepshard::testing::write_file;
using nlohmann::json;

// An example run file as users write it: DeepSpeed keys with "auto", plus deepshard's sections.
const char* const kExampleRun = R"({
  "model": {"preset": "tiny", "n_layer": 2},
  "data": {"train": "data/train.bin", "valid": "data/valid.bin"},
  "train": {"steps": 200, "micro_batch_size": 8, "gradient_accumulation_steps": 2, "lr": 6e-4,
            "warmup_steps": 20, "weight_decay": 0.1, "max_grad_norm": 1.0, "precision": "fp32",
            "run_dir": "runs/tiny", "eval_interval": 50, "seed": 7},
  "comm": {"timeout_s": 60},
  "train_batch_size": "auto",
  "train_micro_batch_size_per_gpu": "auto",
  "gradient_accumulation_steps": "auto",
  "gradient_clipping": "auto",
  "optimizer": {"type": "AdamW", "params": {"lr": "auto", "weight_decay": "auto"}},
  "scheduler": {"type": "WarmupCosineLR",
                "params": {"warmup_num_steps": "auto", "total_num_steps": "auto"}},
  "zero_optimization": {"stage": 0, "reduce_bucket_size": "auto"},
  "bf16": {"enabled": "auto"}
})";

RunConfig parse_run(const std::string& text, int64_t world, std::vector<std::string>* warnings) {
  TempDir dir;
  write_file(dir.file("run.json"), text);
  return parse_run_config(read_json_file(dir.file("run.json")), world, warnings, "run.json",
                          models::arch_schemas());
}

std::string run_error(const json& j, int64_t world = 1) {
  try {
    parse_run_config(j, world, nullptr, "run.json", models::arch_schemas());
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a ConfigError for " << j.dump();
  return "";
}

// GPT-2 parameters with tied embeddings: wte + wpe + per block (12 d^2 + 13 d) + final norm.
int64_t gpt2_parameters(const ModelConfig& m) {
  const int64_t d = m.n_embd;
  return m.vocab_size * d + m.block_size * d + m.n_layer * (12 * d * d + 13 * d) + 2 * d;
}

TEST(RunFile, ExampleRunResolves) {
  std::vector<std::string> warnings;
  RunConfig run = parse_run(kExampleRun, 2, &warnings);
  EXPECT_TRUE(warnings.empty()) << warnings.front();
  // model: the preset fills what the file does not give.
  EXPECT_EQ(run.model.n_layer, 2);
  EXPECT_EQ(run.model.n_head, 4);
  EXPECT_EQ(run.model.n_embd, 128);
  EXPECT_EQ(run.model.block_size, 128);
  EXPECT_EQ(run.model.vocab_size, 256);
  EXPECT_EQ(run.data.train, "data/train.bin");
  EXPECT_EQ(run.data.valid, "data/valid.bin");
  EXPECT_EQ(run.train.steps, 200);
  EXPECT_EQ(run.train.seed, 7u);
  EXPECT_EQ(run.train.eval_interval, 50);
  EXPECT_EQ(run.comm.timeout_s, 60.0);
  // DeepSpeed keys filled from train.
  EXPECT_EQ(run.ds.train_micro_batch_size_per_gpu, 8);
  EXPECT_EQ(run.ds.gradient_accumulation_steps, 2);
  EXPECT_EQ(run.ds.train_batch_size, 8 * 2 * 2);
  EXPECT_EQ(run.ds.optimizer.lr, 6e-4);
  EXPECT_EQ(run.ds.optimizer.weight_decay, 0.1);
  EXPECT_EQ(run.ds.scheduler.warmup_num_steps, 20);
  EXPECT_EQ(run.ds.scheduler.total_num_steps, 200);
  EXPECT_EQ(run.ds.zero.reduce_bucket_size, 128 * 128);
  EXPECT_FALSE(run.ds.bf16.enabled);
  EXPECT_TRUE(unsupported_features(run.ds).empty());

  // The resolved JSON holds everything and parses back to the same run.
  json resolved = json::parse(run.resolved_json);
  EXPECT_EQ(resolved["model"]["n_head"], 4);
  EXPECT_EQ(resolved["train"]["lr"], 6e-4);
  EXPECT_EQ(resolved["train_batch_size"], 32);
  EXPECT_EQ(resolved["optimizer"]["params"]["lr"], 6e-4);
  RunConfig again = parse_run_config(resolved, 2, nullptr, "resolved.json", models::arch_schemas());
  EXPECT_EQ(again.resolved_json, run.resolved_json);
}

TEST(RunFile, EveryShippedExampleIsValidAndRunnable) {
  const std::filesystem::path examples = deepshard::testing::source_dir() + "/examples";
  if (!std::filesystem::exists(examples)) GTEST_SKIP() << "no examples/ directory";
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(examples)) {
    if (entry.path().extension() != ".json") continue;
    std::vector<std::string> warnings;
    RunConfig run = parse_run_config(read_json_file(entry.path()), 2, &warnings, entry.path(),
                                     models::arch_schemas());
    EXPECT_TRUE(warnings.empty()) << entry.path() << ": " << warnings.front();
    EXPECT_TRUE(unsupported_features(run.ds).empty()) << entry.path();
    EXPECT_FALSE(run.data.train.empty()) << entry.path();
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

TEST(RunFile, SectionsAreStrict) {
  EXPECT_EQ(run_error({{"model", {{"n_layers", 4}}}, {"train_batch_size", 8}}),
            "run.json: model.n_layers: unknown key (did you mean 'n_layer'?)");
  EXPECT_EQ(run_error({{"train", {{"lr", "fast"}}}, {"train_batch_size", 8}}),
            "run.json: train.lr: expected a number, found the string \"fast\"");
  EXPECT_EQ(run_error({{"train", {{"precision", "bf61"}}}, {"train_batch_size", 8}}),
            "run.json: train.precision: \"bf61\" is not one of \"fp32\", \"bf16\", \"fp16\" (did "
            "you mean 'bf16'?)");
  EXPECT_EQ(run_error({{"comm", {{"timeout_s", 0}}}, {"train_batch_size", 8}}),
            "run.json: comm.timeout_s: 0 is out of range: must be > 0");
  EXPECT_EQ(run_error({{"model", {{"preset", "huge"}}}, {"train_batch_size", 8}}),
            "run.json: model.preset: \"huge\" is not one of \"tiny\", \"small\", \"gpt2\"");
  EXPECT_EQ(run_error({{"model", {{"n_embd", 100}, {"n_head", 3}}}, {"train_batch_size", 8}}),
            "run.json: model.n_embd: 100 is not divisible by model.n_head = 3");
}

// The task section: its type, label files only for a classification task, and the layouts a
// classification does not run with yet, each an error naming the key.
TEST(RunFile, TaskSection) {
  const json base = {{"train_batch_size", 8}, {"data", {{"train", "t.bin"}}}};
  json classify = base;
  classify["task"] = {{"type", "classification"}};
  RunConfig run = parse_run_config(classify, 1, nullptr, "run.json", models::arch_schemas());
  EXPECT_TRUE(run.task.classification());
  EXPECT_TRUE(run.task.train_labels.empty());  // the trainer finds t.labels
  EXPECT_EQ(json::parse(run.resolved_json)["task"]["type"], "classification");
  EXPECT_FALSE(
      parse_run_config(base, 1, nullptr, "run.json", models::arch_schemas()).task.classification());

  json bad = base;
  bad["task"] = {{"type", "regression"}};
  EXPECT_EQ(run_error(bad).rfind("run.json: task.type: \"regression\" is not one of "
                                 "\"pretraining\", \"classification\"",
                                 0),
            0u);
  bad["task"] = {{"train_labels", "t.labels"}};
  EXPECT_EQ(run_error(bad),
            "run.json: task.train_labels: read only with task.type \"classification\"");
  bad["task"] = {{"type", "classification"}, {"valid_labels", "v.labels"}};
  EXPECT_EQ(run_error(bad),
            "run.json: task.valid_labels: given without data.valid (the token file it labels)");
  bad["task"] = {{"type", "classification"}, {"label_file", "x"}};
  EXPECT_NE(run_error(bad).find("task.label_file: unknown key"), std::string::npos);
  json piped = classify;
  piped["pipeline"] = {{"stages", 2}};
  EXPECT_NE(run_error(piped, 2).find("task.type \"classification\" does not run with pipeline "
                                     "stages yet (pipeline.stages 2)"),
            std::string::npos)
      << run_error(piped, 2);
  json split = classify;
  split["tensor_parallel"] = {{"size", 2}};
  EXPECT_NE(run_error(split, 2).find("task.type \"classification\" does not run with "
                                     "tensor_parallel.size 2 yet"),
            std::string::npos)
      << run_error(split, 2);
}

TEST(RunFile, ErrorsOfAllSectionsAreReportedTogether) {
  std::string message = run_error({{"model", {{"dropout", 2.0}}},
                                   {"data", {{"train", 5}}},
                                   {"zero_optimization", {{"stage", 9}}}});
  EXPECT_EQ(message,
            "run.json: model.dropout: 2 is out of range: must be between 0 and 1\n"
            "run.json: data.train: expected a string, found 5\n"
            "run.json: zero_optimization.stage: 9 is out of range: must be between 0 and 3\n"
            "run.json: train_batch_size: Either train_batch_size or train_micro_batch_size_per_gpu "
            "needs to be provided");
}

TEST(RunFile, UnknownTopLevelKeysWarnButRunSectionsDoNot) {
  std::vector<std::string> warnings;
  parse_run(R"({"train": {"micro_batch_size": 2}, "modle": {}})", 1, &warnings);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0],
            "run.json: modle: unknown key, ignored as DeepSpeed does (did you mean 'model'?)");
}

TEST(ModelPreset, SizesAndParameterCounts) {
  ModelConfig tiny;
  apply_model_preset(tiny, models::arch_schemas());
  EXPECT_EQ(tiny.n_layer, 4);
  EXPECT_EQ(tiny.n_embd % tiny.n_head, 0);
  EXPECT_GT(gpt2_parameters(tiny), 400'000);
  EXPECT_LT(gpt2_parameters(tiny), 1'100'000);

  ModelConfig small;
  small.preset = "small";
  apply_model_preset(small, models::arch_schemas());
  EXPECT_EQ(small.n_embd, 384);
  EXPECT_NEAR(static_cast<double>(gpt2_parameters(small)), 10.7e6, 0.3e6);

  ModelConfig gpt2;
  gpt2.preset = "gpt2";
  apply_model_preset(gpt2, models::arch_schemas());
  EXPECT_EQ(gpt2.block_size, 1024);
  EXPECT_EQ(gpt2.vocab_size, 256);  // byte-level tokenizer unless the run sets it
  gpt2.vocab_size = 50257;
  EXPECT_NEAR(static_cast<double>(gpt2_parameters(gpt2)), 124.4e6, 0.2e6);
}

TEST(ModelPreset, ExplicitSizesOverrideAndUnknownPresetsFail) {
  ModelConfig m;
  m.preset = "small";
  m.n_layer = 2;
  m.block_size = 64;
  apply_model_preset(m, models::arch_schemas());
  EXPECT_EQ(m.n_layer, 2);
  EXPECT_EQ(m.block_size, 64);
  EXPECT_EQ(m.n_embd, 384);

  ModelConfig bad;
  bad.preset = "smal";
  try {
    apply_model_preset(bad, models::arch_schemas());
    ADD_FAILURE() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(),
                 "model.preset: unknown preset \"smal\" for model.arch \"gpt\" (did you mean "
                 "'small'?); presets: tiny, small, gpt2");
  }
}

}  // namespace run_config_test
}  // namespace deepshard::config
