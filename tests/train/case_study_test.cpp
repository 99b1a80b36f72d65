// The shipped case study (examples/genre-case-study.json): the case study's DeepSpeed block of the
// article deepshard follows (tests/data/seed_article/case_study_ds_config.json) key for key, beside
// deepshard's own sections; it runs at N = 2 (here on the test corpus's labelled passages with a
// smaller BERT, 3 steps) and its summary gives the three figures the case study reports: samples/s,
// peak memory per rank and the communication share of the step, with the validation accuracy.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "support/test_support.h"
#include "train/labelled_data.h"
#include "train/run_helpers.h"

namespace deepshard::testing {
namespace case_study_test {

TEST(CaseStudy, ShippedRunFileHasTheBlockAsWrittenAndRunsAtTwoRanks) {
  const std::string file = source_dir() + "/examples/genre-case-study.json";
  nlohmann::json block = nlohmann::json::parse(read_file(file));
  for (const char* own : {"model", "data", "task", "train"}) block.erase(own);
  // The case study's ds_config, key for key (the article's block as JSON, tests/data/seed_article).
  const nlohmann::json article = nlohmann::json::parse(
      read_file(source_dir() + "/tests/data/seed_article/case_study_ds_config.json"));
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
                      "model.vocab_size=256",
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

}  // namespace case_study_test
}  // namespace deepshard::testing
