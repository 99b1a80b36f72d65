// The pipeline-parallel GPT on real ranks (tests/workers/pipeline_worker.cpp): tiny preset shape,
// fp32, 10 steps of Adam with clipping, 4 micro-batches per step through the 1F1B schedule;
// losses, all-stage gradient norms and every stage's parameters equal the single-rank run with
// the same global batch: 2 and 4 stages alone (uniform and parameters partitions), 2 stages x 2
// data-parallel replicas.
#include <gtest/gtest.h>

#include <cstdlib>

#include "support/test_support.h"

namespace deepshard {
namespace pipeline_test {

std::string worker() { return testing::binary_dir() + "/tests/ds_pipeline_worker"; }

void expect_passes(int ranks, const std::string& stages, const std::string& method,
                   const std::string& layers, const std::string& partition) {
  auto r = testing::run_ranks(ranks, worker(),
                              {"pp_gpt_train", stages, method, layers, "10", "4", "0.5"}, 300);
  ASSERT_EQ(r.exit_status, 0) << r.output;
  for (int rank = 0; rank < ranks; ++rank) {
    EXPECT_NE(r.output.find("[rank " + std::to_string(rank) + "] scenario pp_gpt_train passed"),
              std::string::npos)
        << r.output;
  }
  EXPECT_NE(r.output.find("step 10 loss"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(partition), std::string::npos) << r.output;
}

TEST(PipelineGpt, TwoStagesUniformMatchesSingleRank) {
  expect_passes(2, "2", "uniform", "4",
                "(uniform): stage 0: embedding + blocks 0-1; stage 1: blocks 2-3 + head; "
                "bubble fraction 0.2000");
}

// 3 blocks: the heavier embedding (wte + wpe) goes with one block, the head with two.
TEST(PipelineGpt, TwoStagesParametersMatchesSingleRank) {
  expect_passes(2, "2", "parameters", "3",
                "(parameters): stage 0: embedding + blocks 0-0; stage 1: blocks 1-2 + head");
}

// The 6 layer specs over 4 stages 2 2 1 1: the last stage runs the head alone.
TEST(PipelineGpt, FourStagesUniformMatchesSingleRank) {
  expect_passes(4, "4", "uniform", "4",
                "stage 0: embedding + blocks 0-0; stage 1: blocks 1-2; stage 2: blocks 3-3; "
                "stage 3: head; bubble fraction 0.4286");
}

// 6 blocks over 4 stages: by parameters the embedding's stage and the head's take one block each.
TEST(PipelineGpt, FourStagesParametersMatchesSingleRank) {
  expect_passes(4, "4", "parameters", "6",
                "stage 0: embedding + blocks 0-0; stage 1: blocks 1-2; stage 2: blocks 3-4; "
                "stage 3: blocks 5-5 + head");
}

TEST(PipelineGpt, TwoStagesTwoReplicasMatchesSingleRank) {
  expect_passes(4, "2", "uniform", "4", "world 4 = data 2 x pipeline 2 x tensor 1");
}

// Stage 1 of 2 dies (SIGKILL) during a batch: stage 0's receive fails within seconds with the
// transport's error, well inside the group timeout (20 s here), and the job fails.
TEST(PipelineGpt, DeadStageFailsTheOtherStage) {
  auto r =
      testing::run_ranks(2, worker(), {"pp_dead_stage"}, 120, {{"DS_TEST_TIMEOUT_MS", "20000"}});
  EXPECT_NE(r.exit_status, 0) << r.output;
  const std::string caught = "stage 0 caught CommError after ";
  const auto at = r.output.find(caught);
  ASSERT_NE(at, std::string::npos) << r.output;
  EXPECT_LT(std::atof(r.output.c_str() + at + caught.size()), 10.0) << r.output;
  EXPECT_NE(r.output.find("rank 1 exited with status 137"), std::string::npos) << r.output;
}

}  // namespace pipeline_test
}  // namespace deepshard
