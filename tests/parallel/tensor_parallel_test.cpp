// The tensor-parallel GPT and Llama on real ranks (tests/workers/tensor_parallel_worker.cpp):
// tiny shapes, fp32, 10 steps of Adam, losses, all-axes gradient norms (with clipping active) and
// the gathered parameters equal the single-rank run: tensor 2 alone, and tensor 2 x data 2.
#include <gtest/gtest.h>

#include "support/test_support.h"

namespace deepshard {
namespace tensor_parallel_test {

std::string worker() { return testing::binary_dir() + "/tests/ds_tensor_parallel_worker"; }

void expect_passes(int ranks, const std::vector<std::string>& args) {
  auto r = testing::run_ranks(ranks, worker(), args, 300);
  ASSERT_EQ(r.exit_status, 0) << r.output;
  for (int rank = 0; rank < ranks; ++rank) {
    EXPECT_NE(
        r.output.find("[rank " + std::to_string(rank) + "] scenario " + args.front() + " passed"),
        std::string::npos)
        << r.output;
  }
  EXPECT_NE(r.output.find("step 10 loss"), std::string::npos) << r.output;
}

TEST(TensorParallelGpt, Tensor2MatchesSingleRank) {
  expect_passes(2, {"tp_gpt_train", "2", "10", "0.5"});
}

TEST(TensorParallelGpt, Tensor2Data2MatchesSingleRank) {
  expect_passes(4, {"tp_gpt_train", "2", "10", "0.5"});
}

// Untied head (vocabulary-parallel lm_head rows), 2 query heads and 1 key/value head per rank.
TEST(TensorParallelLlama, Tensor2MatchesSingleRank) {
  expect_passes(2, {"tp_llama_train", "2", "10", "0.5", "untied"});
}

// Head tied to the embeddings, gradients averaged over the data group.
TEST(TensorParallelLlama, Tensor2Data2MatchesSingleRank) {
  expect_passes(4, {"tp_llama_train", "2", "10", "0.5", "tied"});
}

TEST(TensorParallelLlama, RefusesSizesTheTensorSizeDoesNotDivide) {
  for (const auto& [key, value] : std::vector<std::pair<std::string, std::string>>{
           {"n_kv_head", "1"}, {"intermediate_size", "255"}, {"vocab_size", "255"}}) {
    auto r = testing::run_ranks(2, worker(), {"tp_llama_refuses", "2", key, value}, 120);
    ASSERT_EQ(r.exit_status, 0) << r.output;
    EXPECT_NE(r.output.find("tensor_parallel.size 2: model." + key + " " + value +
                            " is not divisible by it"),
              std::string::npos)
        << r.output;
  }
}

}  // namespace tensor_parallel_test
}  // namespace deepshard
