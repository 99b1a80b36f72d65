// The BERT's classification task (task.type "classification") through `deepshard train`, which
// runs DeepSpeed's loop (loss = engine(input_ids, labels); backward; step): passages of 10
// documents named as Brown's texts (5 genres; `prepare-data --labels brown-genre`), the pooled
// classifier's cross-entropy. With N = 2 real ranks at ZeRO stages 0, 1, 2 and 3 (fp32, the tiny
// BERT, global batch 24, clipping on; stage 3 also with 2 micro-steps) the losses of 12 steps equal
// the single-rank run's within 1e-4 relative, and so do the validation loss and accuracy over every
// validation passage. Each layout is its own test (each runs the reference too).
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "support/test_support.h"
#include "train/labelled_data.h"
#include "train/run_helpers.h"

namespace deepshard::testing {
namespace classification_equivalence_test {

constexpr int64_t kGlobalBatch = 24;
constexpr int64_t kSteps = 12;

// The single-rank run every layout is compared with, and what it reports.
TEST(ClassificationRun, SingleRankLearnsAndReportsAccuracy) {
  TempDir dir;
  const std::string data = make_labelled_data(dir);
  auto reference = train_and_read_losses(dir, data, 1, kGlobalBatch, 1, "ref",
                                         classification_section(dir), kSteps);
  ASSERT_EQ(reference.losses.size(), size_t(kSteps)) << reference.output;
  EXPECT_NEAR(reference.losses.front(), std::log(15.0), 0.3) << "15 classes at initialisation";
  EXPECT_LT(reference.losses.back(), reference.losses.front()) << "the loss did not fall";
  EXPECT_TRUE(reference.clipped) << "gradient clipping never took effect";
  EXPECT_NE(reference.output.find("task: classification into 15 classes"), std::string::npos)
      << reference.output;
  const auto summary = read_summary(dir, "ref");
  ASSERT_TRUE(summary.contains("final_val_accuracy")) << summary.dump();
  const double accuracy = summary.at("final_val_accuracy");
  EXPECT_GE(accuracy, 0.0);
  EXPECT_LE(accuracy, 1.0);
  // news, the training passages' commonest class, is ca05's: half the validation passages.
  EXPECT_EQ(summary.at("majority_baseline").get<double>(), 0.5);
  EXPECT_EQ(summary.at("task"), "classification");
  EXPECT_GT(summary.at("mean_samples_per_s").get<double>(), 0.0);
  const auto last = read_metrics(dir.file("run_ref")).back();
  EXPECT_EQ(last.at("val_accuracy").get<double>(), accuracy);
  EXPECT_EQ(last.at("majority_baseline"), summary.at("majority_baseline"));
  EXPECT_GT(last.at("samples_per_s").get<double>(), 0.0);
  // The pooler (C^2 + C) and the classifier (15 (C + 1)) beside the masked-LM BERT's parameters.
  const int64_t layer = 4 * (64 * 64 + 64) + (64 * 128 + 128) + (128 * 64 + 64) + 4 * 64;
  const int64_t mlm = (256 + 32 + 2 + 2) * 64 + 2 * layer + 64 * 64 + 64 + 2 * 64 + 256;
  EXPECT_EQ(summary.at("num_parameters"), mlm + 64 * 64 + 64 + 15 * 65);
}

struct Layout {
  int stage;
  int64_t accumulation;
};

class ClassificationEquivalence : public ::testing::TestWithParam<Layout> {};

TEST_P(ClassificationEquivalence, TwoRanksReproduceTheSingleRankRun) {
  const Layout layout = GetParam();
  TempDir dir;
  const std::string data = make_labelled_data(dir);
  auto reference = train_and_read_losses(dir, data, 1, kGlobalBatch, 1, "ref",
                                         classification_section(dir), kSteps);
  ASSERT_EQ(reference.losses.size(), size_t(kSteps)) << reference.output;
  const auto ref_summary = read_summary(dir, "ref");
  const std::string what = "classification, stage " + std::to_string(layout.stage) +
                           ", 2 ranks, accumulation " + std::to_string(layout.accumulation);
  auto run = train_and_read_losses(
      dir, data, 2, kGlobalBatch / (2 * layout.accumulation), layout.accumulation, "n2",
      classification_section(dir, {{"zero_optimization", {{"stage", layout.stage}}}}), kSteps);
  expect_same_losses(run, reference, what);
  const auto summary = read_summary(dir, "n2");
  const double val_loss = ref_summary.at("final_val_loss");
  EXPECT_NEAR(summary.at("final_val_loss").get<double>(), val_loss, 1e-4 * val_loss) << what;
  EXPECT_EQ(summary.at("final_val_accuracy"), ref_summary.at("final_val_accuracy")) << what;
  EXPECT_EQ(summary.at("majority_baseline"), ref_summary.at("majority_baseline")) << what;
  EXPECT_EQ(summary.at("num_parameters"), ref_summary.at("num_parameters")) << what;
}

INSTANTIATE_TEST_SUITE_P(Stages, ClassificationEquivalence,
                         ::testing::Values(Layout{0, 1}, Layout{1, 1}, Layout{2, 1}, Layout{3, 1},
                                           Layout{3, 2}),
                         [](const auto& info) {
                           return "stage" + std::to_string(info.param.stage) + "_accumulation" +
                                  std::to_string(info.param.accumulation);
                         });

}  // namespace classification_equivalence_test
}  // namespace deepshard::testing
