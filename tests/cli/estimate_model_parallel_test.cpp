// `deepshard estimate --tensor T --pipeline S`: the layout line, each stage's parameters per
// tensor rank (model_parallel_counts, checked against real tensor-parallel models and pipeline
// stages in tests/parallel/model_parallel_counts_test.cpp), the model-states table computed for
// the heaviest stage over the data-parallel ranks, and the refusals.
#include <gtest/gtest.h>

#include "deepshard/models/parameter_shapes.h"
#include "parallel/model_parallel_counts.h"
#include "support/test_support.h"

namespace deepshard::testing {
namespace estimate_model_parallel_test {

TEST(EstimateModelParallel, GptTensor2Pipeline2) {
  auto r = run_deepshard({"estimate", "--model", "tiny", "--ranks", "8", "--tensor", "2",
                          "--pipeline", "2", "--stage", "1", "--dtype", "fp32"});
  ASSERT_EQ(r.exit_status, 0) << r.output;
  models::GptConfig c;  // the tiny preset: 4 layers, 4 heads, 128 wide, block 128, byte vocabulary
  c.n_layer = 4;
  c.n_head = 4;
  c.n_embd = 128;
  c.block_size = 128;
  c.vocab_size = 256;
  const auto counts = parallel::model_parallel_counts(models::gpt_parameter_shapes(c), "wte.weight",
                                                      models::gpt_tensor_plan(), "Block", 2, 2,
                                                      parallel::PartitionMethod::kUniform);
  EXPECT_NE(r.output.find("layout: 8 ranks = tensor 2 x pipeline 2 x data 2; partition uniform: "
                          "stage 0: embedding + blocks 0-1; stage 1: blocks 2-3 + head"),
            std::string::npos)
      << r.output;
  for (int s = 0; s < 2; ++s) {
    EXPECT_NE(r.output.find("stage " + std::to_string(s) + ": " +
                            std::to_string(counts.stage_params[size_t(s)]) +
                            " parameters per tensor rank"),
              std::string::npos)
        << r.output;
  }
  const int64_t heaviest = counts.stage_params[size_t(counts.heaviest_stage())];
  EXPECT_NE(
      r.output.find("model states per rank: " + std::to_string(heaviest) + " parameters, 2 ranks"),
      std::string::npos)
      << r.output;
  // Every ZeRO stage shards a pipeline stage over its data-parallel group: the table's 4 rows.
  EXPECT_NE(r.output.find("\n* 1 "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\n  3 "), std::string::npos) << r.output;
}

TEST(EstimateModelParallel, LlamaTensor2) {
  auto r = run_deepshard(
      {"estimate", "--arch", "llama", "--model", "tiny", "--ranks", "4", "--tensor", "2"});
  ASSERT_EQ(r.exit_status, 0) << r.output;
  EXPECT_NE(r.output.find("layout: 4 ranks = tensor 2 x pipeline 1 x data 2"), std::string::npos)
      << r.output;
}

TEST(EstimateModelParallel, Refusals) {
  for (const auto& [args, message] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--model", "tiny", "--ranks", "6", "--tensor", "4"}, "is not divisible by --tensor"},
           {{"--params", "1e6", "--ranks", "4", "--tensor", "2"}, "--params: with --tensor"},
           {{"--model", "tiny", "--ranks", "8", "--tensor", "8"}, "must divide the heads"},
           {{"--arch", "llama", "--model", "tiny", "--ranks", "4", "--tensor", "4"},
            "must divide the heads (4) and key/value heads (2)"},
           {{"--model", "tiny", "--ranks", "2", "--pipeline", "2", "--budget", "1e9"},
            "--budget: the activation estimate does not model"},
           {{"--model", "tiny", "--partition", "parameters"}, "--partition needs --pipeline"},
           {{"--model", "tiny", "--ranks", "4", "--pipeline", "2", "--stage", "4"},
            "--stage must be 0, 1, 2 or 3"}}) {
    std::vector<std::string> full = {"estimate"};
    full.insert(full.end(), args.begin(), args.end());
    auto r = run_deepshard(full);
    EXPECT_NE(r.exit_status, 0) << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << r.output;
  }
}

}  // namespace estimate_model_parallel_test
}  // namespace deepshard::testing
