// The BERT's classification task (task.type "classification") through `deepshard train`, which
// runs DeepSpeed's loop (loss = engine(input_ids, labels); backward; step): passages of 10
// documents named as Brown's texts (5 genres; `prepare-data --labels brown-genre`), the pooled
// classifier's cross-entropy. With N = 2 real ranks at ZeRO stages 0, 1, 2 and 3 (fp32, the tiny
// BERT, global batch 24, clipping on) the losses of 20 steps equal the single-rank run's within
// 1e-4 relative, and so do the validation loss and accuracy over every validation passage.
// Fine-tuning from a masked-LM run's weights (model.init_from) starts the classification head
// fresh and says so. The shipped case study (examples/genre-case-study.json) holds the case
// study's DeepSpeed block as written and runs at N = 2, its summary giving samples/s, peak memory
// per rank and the communication share.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "support/test_support.h"
#include "train/run_helpers.h"

namespace deepshard::testing {
namespace {

constexpr int64_t kGlobalBatch = 24;

// <dir>/genre.bin, .valid.bin and their .labels: the test corpus cut into 10 documents named
// ca01 ... ce02, passages of 48 bytes, 2 documents for validation.
std::string make_labelled_data(const TempDir& dir) {
  const std::string text = read_file(source_dir() + "/tests/train/data/corpus.txt");
  std::filesystem::create_directories(dir.file("docs"));
  const std::vector<std::string> names = {"ca01", "ca02", "cb01", "cb02", "cc01",
                                          "cc02", "cd01", "cd02", "ce01", "ce02"};
  const size_t chunk = text.size() / names.size();
  for (size_t i = 0; i < names.size(); ++i)
    write_file(dir.file("docs/" + names[i]), text.substr(i * chunk, chunk));
  auto r = run_deepshard({"prepare-data", dir.file("docs"), "-o", dir.file("genre.bin"), "--labels",
                          "brown-genre", "--passage-tokens", "48", "--valid-fraction", "0.2"},
                         60);
  EXPECT_EQ(r.exit_status, 0) << r.output;
  return dir.file("genre.bin");
}

std::string classification_section(const TempDir& dir, const nlohmann::json& more) {
  nlohmann::json j = {{"model", {{"arch", "bert"}, {"intermediate_size", 128}}},
                      {"data", {{"valid", dir.file("genre.valid.bin")}}},
                      {"task", {{"type", "classification"}}}};
  j.merge_patch(more);
  return j.dump();
}

nlohmann::json read_summary(const TempDir& dir, const std::string& name) {
  return nlohmann::json::parse(read_file(dir.file("run_" + name) + "/summary.json"));
}

TEST(ClassificationEquivalence, EveryStageReproducesSingleRankLosses) {
  TempDir dir;
  const std::string data = make_labelled_data(dir);
  auto reference =
      train_and_read_losses(dir, data, 1, kGlobalBatch, 1, "ref", classification_section(dir, {}));
  ASSERT_EQ(reference.losses.size(), 20u) << reference.output;
  EXPECT_NEAR(reference.losses.front(), std::log(15.0), 0.3) << "15 classes at initialisation";
  EXPECT_LT(reference.losses.back(), reference.losses.front()) << "the loss did not fall";
  EXPECT_TRUE(reference.clipped) << "gradient clipping never took effect";
  EXPECT_NE(reference.output.find("task: classification into 15 classes"), std::string::npos)
      << reference.output;
  const auto ref_summary = read_summary(dir, "ref");
  ASSERT_TRUE(ref_summary.contains("final_val_accuracy")) << ref_summary.dump();
  const double accuracy = ref_summary.at("final_val_accuracy");
  const double baseline = ref_summary.at("majority_baseline");
  EXPECT_GE(accuracy, 0.0);
  EXPECT_LE(accuracy, 1.0);
  EXPECT_GT(baseline, 0.0);
  EXPECT_EQ(ref_summary.at("task"), "classification");
  EXPECT_GT(ref_summary.at("mean_samples_per_s").get<double>(), 0.0);
  const auto last = read_metrics(dir.file("run_ref")).back();
  EXPECT_EQ(last.at("val_accuracy").get<double>(), accuracy);
  const double val_loss = ref_summary.at("final_val_loss");
  // The pooler (C^2 + C) and the classifier (15 (C + 1)) beside the masked-LM BERT's parameters.
  const int64_t layer = 4 * (64 * 64 + 64) + (64 * 128 + 128) + (128 * 64 + 64) + 4 * 64;
  const int64_t mlm = (256 + 32 + 2 + 2) * 64 + 2 * layer + 64 * 64 + 64 + 2 * 64 + 256;
  EXPECT_EQ(ref_summary.at("num_parameters"), mlm + 64 * 64 + 64 + 15 * 65);

  for (int stage : {0, 1, 2, 3}) {
    const std::string name = "s" + std::to_string(stage);
    auto run = train_and_read_losses(
        dir, data, 2, kGlobalBatch / 2, 1, name,
        classification_section(dir, {{"zero_optimization", {{"stage", stage}}}}));
    expect_same_losses(run, reference,
                       "classification, stage " + std::to_string(stage) + ", 2 ranks");
    const auto summary = read_summary(dir, name);
    EXPECT_NEAR(summary.at("final_val_loss").get<double>(), val_loss, 1e-4 * val_loss) << name;
    EXPECT_EQ(summary.at("final_val_accuracy").get<double>(), accuracy) << name;
    EXPECT_EQ(summary.at("majority_baseline").get<double>(), baseline) << name;
  }
  // Stage 3 with 2 micro-steps of 6.
  auto accumulated =
      train_and_read_losses(dir, data, 2, kGlobalBatch / 4, 2, "s3_gas2",
                            classification_section(dir, {{"zero_optimization", {{"stage", 3}}}}));
  expect_same_losses(accumulated, reference, "classification, stage 3, 2 ranks, accumulation 2");
}

TEST(ClassificationEquivalence, FineTunesFromMaskedLmWeightsWithAFreshHead) {
  TempDir dir;
  const std::string data = make_labelled_data(dir);
  // Masked-LM pretraining on the same token file (task pretraining: the label files unread).
  auto pretrain = train_and_read_losses(
      dir, data, 1, 8, 1, "mlm",
      nlohmann::json({{"model", {{"arch", "bert"}, {"intermediate_size", 128}}},
                      {"train", {{"save_weights", true}}}})
          .dump(),
      5);
  ASSERT_EQ(pretrain.losses.size(), 5u) << pretrain.output;
  const std::string weights = dir.file("run_mlm") + "/model.safetensors";
  ASSERT_TRUE(std::filesystem::exists(weights)) << pretrain.output;
  auto tuned =
      train_and_read_losses(dir, data, 2, 4, 1, "tuned",
                            classification_section(dir, {{"model", {{"init_from", weights}}}}), 5);
  ASSERT_EQ(tuned.losses.size(), 5u) << tuned.output;
  EXPECT_NE(tuned.output.find("model.init_from: " + weights +
                              " has no bert.pooler.dense.weight, bert.pooler.dense.bias, "
                              "classifier.weight, classifier.bias; freshly initialised"),
            std::string::npos)
      << tuned.output;

  // What a classification run refuses: label files of other token files, a decoder.
  const std::string other = dir.file("other.bin");
  std::filesystem::copy_file(dir.file("genre.valid.bin"), other);
  std::filesystem::copy_file(dir.file("genre.labels"), dir.file("other.labels"));
  const std::string config = dir.file("mismatch.json");
  write_file(config, tiny_run_config(other, dir.file("run_mismatch"), 4, 1, 2,
                                     classification_section(dir, {})));
  auto mismatch = run_deepshard({"train", "--config", config}, 120);
  EXPECT_NE(mismatch.exit_status, 0);
  EXPECT_NE(mismatch.output.find(dir.file("other.labels") + ": describes a token file of"),
            std::string::npos)
      << mismatch.output;
  write_file(config,
             tiny_run_config(data, dir.file("run_gpt"), 4, 1, 2,
                             nlohmann::json({{"task", {{"type", "classification"}}}}).dump()));
  auto gpt = run_deepshard({"train", "--config", config}, 120);
  EXPECT_NE(gpt.exit_status, 0);
  EXPECT_NE(gpt.output.find("model.arch \"gpt\" has no classification head"), std::string::npos)
      << gpt.output;
}

TEST(CaseStudy, ShippedRunFileHasTheBlockAsWrittenAndRunsAtTwoRanks) {
  const std::string file = source_dir() + "/examples/genre-case-study.json";
  nlohmann::json block = nlohmann::json::parse(read_file(file));
  for (const char* own : {"model", "data", "task", "train"}) block.erase(own);
  // The case study's ds_config, key for key.
  const nlohmann::json article = {
      {"train_batch_size", 16},
      {"gradient_accumulation_steps", 2},
      {"optimizer", {{"type", "AdamW"}, {"params", {{"lr", 5e-5}, {"weight_decay", 0.1}}}}},
      {"zero_optimization",
       {{"stage", 3},
        {"offload_optimizer", {{"device", "cpu"}, {"pin_memory", true}}},
        {"overlap_comm", true},
        {"contiguous_gradients", true}}},
      {"fp16", {{"enabled", true}}}};
  EXPECT_EQ(block, article) << block.dump(2);

  TempDir dir;
  const std::string data = make_labelled_data(dir);
  const std::string run_dir = dir.file("run_case");
  auto r = run_ranks(2, deepshard_exe(),
                     {"train",
                      "--config",
                      file,
                      "--set",
                      "data.train=" + data,
                      "--set",
                      "data.valid=" + dir.file("genre.valid.bin"),
                      "--set",
                      "model.init_from=",
                      "--set",
                      "model.n_layer=2",
                      "--set",
                      "model.n_embd=64",
                      "--set",
                      "model.intermediate_size=128",
                      "--set",
                      "model.block_size=32",
                      "--set",
                      "train.steps=3",
                      "--set",
                      "train.run_dir=" + run_dir},
                     300);
  ASSERT_EQ(r.exit_status, 0) << r.output;
  const auto summary = nlohmann::json::parse(read_file(run_dir + "/summary.json"));
  EXPECT_EQ(summary.at("world_size"), 2);
  EXPECT_EQ(summary.at("steps"), 3);
  EXPECT_GT(summary.at("mean_samples_per_s").get<double>(), 0.0);
  ASSERT_EQ(summary.at("peak_rss_bytes").size(), 2u);
  for (const auto& bytes : summary.at("peak_rss_bytes")) EXPECT_GT(bytes.get<double>(), 0.0);
  const double share = summary.at("comm_wait_share");
  EXPECT_GE(share, 0.0);
  EXPECT_LT(share, 1.0);
  EXPECT_TRUE(summary.contains("final_val_accuracy")) << summary.dump();
  EXPECT_EQ(summary.at("config").at("zero_optimization").at("stage"), 3);
}

}  // namespace
}  // namespace deepshard::testing
