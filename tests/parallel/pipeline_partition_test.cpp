// Splitting a model's layers over pipeline stages (pipeline_partition.h), uniform and by
// parameter count, against DeepSpeed's partition_uniform / partition_balanced results.
#include "deepshard/parallel/pipeline_partition.h"

#include <gtest/gtest.h>

#include "deepshard/util/error.h"

namespace deepshard::parallel {
namespace {

using Bounds = std::vector<int64_t>;

TEST(PipelinePartition, UniformGivesTheFirstStagesTheRemainder) {
  EXPECT_EQ(partition_uniform(4, 2).block_begin, (Bounds{0, 2, 4}));
  EXPECT_EQ(partition_uniform(6, 4).block_begin, (Bounds{0, 2, 4, 5, 6}));
  EXPECT_EQ(partition_uniform(7, 3).block_begin, (Bounds{0, 3, 5, 7}));
  EXPECT_EQ(partition_uniform(3, 1).block_begin, (Bounds{0, 3}));
  EXPECT_EQ(partition_uniform(4, 4).describe(),
            "stage 0: embedding + blocks 0-0; stage 1: blocks 1-1; stage 2: blocks 2-2; "
            "stage 3: blocks 3-3 + head");
  EXPECT_THROW(partition_uniform(3, 4), ConfigError);
}

TEST(PipelinePartition, ParametersMinimisesTheHeaviestStage) {
  // Equal blocks, light embedding and head: as uniform.
  EXPECT_EQ(partition_parameters(1, {10, 10, 10, 10}, 1, 2).block_begin, (Bounds{0, 2, 4}));
  // A heavy embedding (large vocabulary) gets a stage of its own; heaviest part 20.
  EXPECT_EQ(partition_parameters(20, {10, 10, 10, 10}, 1, 3).block_begin, (Bounds{0, 0, 2, 4}));
  // A heavy first block: [e | b0 | b1 b2 b3 h] = 1 | 30 | 22, where uniform's 2 1 1 blocks weigh
  // 41 | 1 | 11.
  EXPECT_EQ(partition_parameters(1, {30, 10, 1, 10}, 1, 3).block_begin, (Bounds{0, 0, 1, 4}));
  // The GPT tiny shape with 3 blocks: wte + wpe (36 864) outweighs ln_f + wte (33 024), so the
  // embedding's stage takes one block and the head's two.
  const int64_t block = 198272;
  EXPECT_EQ(partition_parameters(36864, {block, block, block}, 33024, 2).block_begin,
            (Bounds{0, 1, 3}));
  EXPECT_EQ(partition_parameters(36864, std::vector<int64_t>(6, block), 33024, 4).describe(),
            "stage 0: embedding + blocks 0-0; stage 1: blocks 1-2; stage 2: blocks 3-4; "
            "stage 3: blocks 5-5 + head");
  // Stages of only the embedding or only the head are allowed; too many stages are not.
  EXPECT_EQ(partition_parameters(5, {5}, 5, 3).block_begin, (Bounds{0, 0, 1, 1}));
  EXPECT_THROW(partition_parameters(5, {5}, 5, 4), ConfigError);
}

TEST(PipelinePartition, MethodNames) {
  EXPECT_EQ(parse_partition_method("uniform"), PartitionMethod::kUniform);
  EXPECT_EQ(parse_partition_method("parameters"), PartitionMethod::kParameters);
  EXPECT_THROW(parse_partition_method("type:Block"), ConfigError);
}

}  // namespace
}  // namespace deepshard::parallel
