// Fine-tuning the BERT's classifier from masked-LM weights (model.init_from of a masked-LM run's
// model.safetensors): the classification head (pooler, classifier), which the file lacks, starts
// fresh and the run says so by name. A classification run refuses label files of other token
// files and a model without a classification head, naming the file or the architecture.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "support/test_support.h"
#include "train/labelled_data.h"
#include "train/run_helpers.h"

namespace deepshard::testing {
namespace classification_finetune_test {

TEST(ClassificationFineTune, FromMaskedLmWeightsWithAFreshHead) {
  TempDir dir;
  const std::string data = make_labelled_data(dir);
  // Masked-LM pretraining on the same token file (task pretraining: the label files unread).
  auto pretrain = train_and_read_losses(
      dir, data, 1, 8, 1, "mlm",
      nlohmann::json({{"model", {{"arch", "bert"}, {"intermediate_size", 128}}},
                      {"train", {{"save_weights", true}}}})
          .dump(),
      3);
  ASSERT_EQ(pretrain.losses.size(), 3u) << pretrain.output;
  const std::string weights = dir.file("run_mlm") + "/model.safetensors";
  ASSERT_TRUE(std::filesystem::exists(weights)) << pretrain.output;
  auto tuned =
      train_and_read_losses(dir, data, 2, 4, 1, "tuned",
                            classification_section(dir, {{"model", {{"init_from", weights}}}}), 3);
  ASSERT_EQ(tuned.losses.size(), 3u) << tuned.output;
  EXPECT_NE(tuned.output.find("model.init_from: " + weights +
                              " has no bert.pooler.dense.weight, bert.pooler.dense.bias, "
                              "classifier.weight, classifier.bias; freshly initialised"),
            std::string::npos)
      << tuned.output;
  // The encoder is the pretrained one: the first loss differs from a fresh model's.
  auto fresh = train_and_read_losses(dir, data, 2, 4, 1, "fresh", classification_section(dir), 1);
  ASSERT_EQ(fresh.losses.size(), 1u) << fresh.output;
  EXPECT_NE(tuned.losses.front(), fresh.losses.front());
}

TEST(ClassificationFineTune, RefusesOtherTokenFilesLabelsAndADecoder) {
  TempDir dir;
  const std::string data = make_labelled_data(dir);
  const std::string other = dir.file("other.bin");
  std::filesystem::copy_file(dir.file("genre.valid.bin"), other);
  std::filesystem::copy_file(dir.file("genre.labels"), dir.file("other.labels"));
  const std::string config = dir.file("mismatch.json");
  write_file(config, tiny_run_config(other, dir.file("run_mismatch"), 4, 1, 2,
                                     classification_section(dir)));
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

}  // namespace classification_finetune_test
}  // namespace deepshard::testing
