// parallel::model_parallel_counts, the estimator's per-rank parameter counts: for pipelines,
// equal to what each real PipelineStage of the GPT and of the Llama (untied and tied) holds (2 and
// 4 stages, uniform and parameters, the tied embedding's copy on the last stage); for tensor
// parallelism, equal to what each rank of a real TensorParallelGpt / TensorParallelLlama holds (2
// real ranks, tests/workers/ tensor_parallel_worker.cpp); and the refusals name the key.
#include "parallel/model_parallel_counts.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "deepshard/models/gpt.h"
#include "deepshard/models/llama.h"
#include "deepshard/models/parameter_shapes.h"
#include "deepshard/util/error.h"
#include "parallel/pipeline_stage.h"
#include "support/test_support.h"

namespace deepshard::parallel {
namespace model_parallel_counts_test {

models::GptConfig gpt_config(int64_t layers) {
  models::GptConfig c;
  c.n_layer = layers;
  c.n_head = 4;
  c.n_embd = 32;
  c.block_size = 16;
  c.vocab_size = 64;
  return c;
}

// Stages of fresh models from `make` (the same on every call) hold what the estimate says.
template <typename Make>
void expect_stages_hold_estimate(const std::vector<models::NamedShape>& shapes,
                                 const std::string& tied, int stages, PartitionMethod method,
                                 Make make) {
  const ModelParallelCounts counts = model_parallel_counts(
      shapes, tied, make()->sharding_plan().tensor_plan(), "Block", 1, stages, method);
  const StagePartition real = partition_model(*make(), method, stages);
  ASSERT_EQ(counts.partition.block_begin, real.block_begin) << real.describe();
  int64_t heaviest = 0;
  for (int s = 0; s < stages; ++s) {
    PipelineStage stage(make(), real, s);
    EXPECT_EQ(stage.tied_name(), tied);
    int64_t held = 0;
    for (const auto& [name, p] : stage.named_parameters()) held += p.numel();
    EXPECT_EQ(counts.stage_params.at(size_t(s)), held)
        << "stage " << s << " of " << stages << " (" << real.describe() << ")";
    heaviest = std::max(heaviest, held);
  }
  EXPECT_EQ(counts.stage_params.at(size_t(counts.heaviest_stage())), heaviest);
}

const std::vector<std::tuple<int64_t, int, PartitionMethod>> kLayouts = {
    {4, 2, PartitionMethod::kUniform},
    {3, 2, PartitionMethod::kParameters},
    {6, 4, PartitionMethod::kUniform},
    {6, 4, PartitionMethod::kParameters}};

TEST(ModelParallelCounts, PipelineStagesHoldWhatTheEstimateSays) {
  for (const auto& [layers, stages, method] : kLayouts) {
    const models::GptConfig c = gpt_config(layers);
    expect_stages_hold_estimate(models::gpt_parameter_shapes(c), "wte.weight", stages, method,
                                [&] { return models::Gpt(c, 1).ptr(); });
  }
}

// The Llama's stages: model.embed_tokens on the first, model.norm and lm_head on the last (with
// tie_word_embeddings the last holds a copy of embed_tokens instead of lm_head).
TEST(ModelParallelCounts, LlamaPipelineStagesHoldWhatTheEstimateSays) {
  for (const bool tie : {false, true}) {
    for (const auto& [layers, stages, method] : kLayouts) {
      models::LlamaConfig c;
      c.n_layer = layers;
      c.n_embd = 32;
      c.intermediate_size = 48;
      c.block_size = 16;
      c.vocab_size = 64;
      c.tie_word_embeddings = tie;
      expect_stages_hold_estimate(models::llama_parameter_shapes(c),
                                  tie ? "model.embed_tokens.weight" : "", stages, method,
                                  [&] { return models::Llama(c, 1).ptr(); });
    }
  }
}

TEST(ModelParallelCounts, TensorRanksHoldWhatTheEstimateSays) {
  auto r = testing::run_ranks(2, testing::binary_dir() + "/tests/ds_tensor_parallel_worker",
                              {"tp_counts", "2"}, 120);
  ASSERT_EQ(r.exit_status, 0) << r.output;
  EXPECT_NE(r.output.find("scenario tp_counts passed on rank 1"), std::string::npos) << r.output;
}

// Tensor 2 x pipeline 2 of the tiny GPT (uniform): each stage's blocks and its end of the model,
// the split parameters halved.
TEST(ModelParallelCounts, TensorTimesPipelineAddsUp) {
  const models::GptConfig c = gpt_config(4);
  const auto shapes = models::gpt_parameter_shapes(c);
  const auto counts = model_parallel_counts(shapes, "wte.weight", models::gpt_tensor_plan(),
                                            "Block", 2, 2, PartitionMethod::kUniform);
  const int64_t C = c.n_embd;
  // A block: LayerNorms (4C) and the biases of the row-parallel projections (2C) whole, the rest
  // (12 C^2 weights, 3C + 4C column-parallel biases) halved.
  const int64_t block = 4 * C + 2 * C + (12 * C * C + 7 * C) / 2;
  const int64_t wte = c.vocab_size * C / 2, wpe = c.block_size * C, ln_f = 2 * C;
  EXPECT_EQ(counts.stage_params,
            (std::vector<int64_t>{wte + wpe + 2 * block, 2 * block + ln_f + wte}));
  EXPECT_EQ(counts.heaviest_stage(), 0);
}

TEST(ModelParallelCounts, RefusalsNameTheKey) {
  const auto shapes = models::gpt_parameter_shapes(gpt_config(2));
  try {
    model_parallel_counts(shapes, "wte.weight", models::gpt_tensor_plan(), "Block", 3, 1,
                          PartitionMethod::kUniform);
    FAIL() << "tensor 3 accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("tensor_parallel.size 3 does not divide"),
              std::string::npos)
        << e.what();
  }
  // 2 blocks with the embedding and the head: 4 layer specs, fewer than 5 stages.
  EXPECT_THROW(model_parallel_counts(shapes, "wte.weight", models::gpt_tensor_plan(), "Block", 1, 5,
                                     PartitionMethod::kUniform),
               ConfigError);
}

}  // namespace model_parallel_counts_test
}  // namespace deepshard::parallel
