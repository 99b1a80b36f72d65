// Splitting a model's layer specs over pipeline stages (pipeline_partition.h): DeepSpeed's
// partition_uniform, partition_balanced and type: results, on hand-picked cases and on 1200
// random layer-size vectors whose boundaries DeepSpeed's own functions computed
// (tests/parallel/data/deepspeed_partitions.txt: the DeepSpeed commit and the generator are in its
// header; the vectors are regenerated here from the same splitmix64 stream).
#include "parallel/pipeline_partition.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "deepshard/util/error.h"
#include "support/test_support.h"

namespace deepshard::parallel {
namespace pipeline_partition_test {

using Bounds = std::vector<int64_t>;

TEST(PipelinePartition, UniformSplitsEveryLayerSpec) {
  // [embedding, 4 blocks, head] = 6 items over 2 stages: 3 + 3.
  EXPECT_EQ(partition_uniform(4, 2).block_begin, (Bounds{0, 2, 4}));
  // 8 items over 4: 2 each, so the embedding's and the head's stages run one block.
  EXPECT_EQ(partition_uniform(6, 4).block_begin, (Bounds{0, 1, 3, 5, 6}));
  // 9 items over 3.
  EXPECT_EQ(partition_uniform(7, 3).block_begin, (Bounds{0, 2, 5, 7}));
  EXPECT_EQ(partition_uniform(3, 1).block_begin, (Bounds{0, 3}));
  // GPT-2 small (12 blocks) over 3 stages: 14 items as 5 5 4, so 4 5 3 blocks.
  EXPECT_EQ(partition_uniform(12, 3).block_begin, (Bounds{0, 4, 9, 12}));
  EXPECT_EQ(partition_uniform(2, 4).describe(),
            "stage 0: embedding; stage 1: blocks 0-0; stage 2: blocks 1-1; stage 3: head");
  EXPECT_THROW(partition_uniform(3, 6), ConfigError);
  EXPECT_EQ(uniform_boundaries(3, 5), (Bounds{0, 1, 2, 3, 3, 3}));  // DeepSpeed's empty parts
}

TEST(PipelinePartition, ParametersIsDeepSpeedsBalancedPartition) {
  // GPT-2 small: wte + wpe, 12 blocks, ln_f + the head's copy of wte. 8 stages: the embedding and
  // the head alone, two blocks on each of the other six (39 / 14 x 6 / 39 M parameters).
  const int64_t block = 7087872;
  const std::vector<int64_t> blocks(12, block);
  EXPECT_EQ(partition_parameters(39383808, blocks, 38598912, 8).block_begin,
            (Bounds{0, 0, 2, 4, 6, 8, 10, 12, 12}));
  EXPECT_EQ(partition_parameters(39383808, blocks, 38598912, 3).block_begin,
            (Bounds{0, 2, 10, 12}));
  // The smallest difference between the heaviest and the lightest stage, not the lightest
  // heaviest one: [1 30 | 10 1 | 10 1] (31 / 11 / 11) rather than [1 | 30 | 10 1 10 1] (1 / 30 /
  // 22).
  EXPECT_EQ(balanced_boundaries({1, 30, 10, 1, 10, 1}, 3), (Bounds{0, 2, 4, 6}));
  EXPECT_EQ(balanced_boundaries({20, 10, 10, 10, 10, 1}, 3), (Bounds{0, 1, 3, 6}));
  // Stages of only the embedding or only the head are allowed; too many stages are not.
  EXPECT_EQ(partition_parameters(5, {5}, 5, 3).block_begin, (Bounds{0, 0, 1, 1}));
  EXPECT_THROW(partition_parameters(5, {5}, 5, 4), ConfigError);
}

TEST(PipelinePartition, TypeBalancesTheMatchingLayers) {
  PipelineItems items{{"Embedding", "Block", "Block", "Block", "Block", "Head"},
                      {9, 1, 1, 1, 1, 9}};
  // Two blocks a stage; the embedding and the head weigh nothing.
  EXPECT_EQ(partition_items(items, parse_partition_method("type:block"), 2).block_begin,
            (Bounds{0, 2, 4}));
  EXPECT_EQ(parse_partition_method("TYPE:BLOCK"), PartitionMethod::type("block"));
  EXPECT_EQ(type_weights(items.types, "^b|head$"), (Bounds{0, 1, 1, 1, 1, 1}));
  try {
    partition_items(items, parse_partition_method("type:transformer"), 2);
    ADD_FAILURE() << "no layer is a transformer";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("pipeline.partition: \"type:transformer\" matches none "
                                         "of the model's layer types (Embedding, Block, Head)"),
              std::string::npos)
        << e.what();
  }
}

TEST(PipelinePartition, MethodNames) {
  EXPECT_EQ(parse_partition_method("uniform"), PartitionMethod::kUniform);
  EXPECT_EQ(parse_partition_method("Parameters"), PartitionMethod::kParameters);
  // DeepSpeed keeps the text up to the next ':' of the lower-cased method.
  EXPECT_EQ(to_string(parse_partition_method("type:Block:x")), "type:block");
  EXPECT_THROW(parse_partition_method("profile"), ConfigError);
  EXPECT_THROW(parse_partition_method("type:(unclosed"), ConfigError);
}

// splitmix64, as the generator of deepspeed_partitions.txt drew its cases.
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
};

Bounds parse_bounds(const std::string& text) {
  std::istringstream in(text);
  Bounds b;
  for (int64_t v; in >> v;) b.push_back(v);
  return b;
}

TEST(DeepSpeedPartitions, BoundariesEqualDeepSpeedsOnRandomLayerSizes) {
  std::ifstream file(testing::source_dir() + "/tests/parallel/data/deepspeed_partitions.txt");
  ASSERT_TRUE(file) << "tests/parallel/data/deepspeed_partitions.txt";
  const std::vector<std::string> names = {"Embedding", "Block", "LlamaBlock", "Head", "Norm"};
  const std::vector<std::string> methods = {"type:block", "type:^embedding$", "type:Llama|HEAD",
                                            "type:b.*k$", "type:norm|head"};
  const std::pair<int64_t, uint64_t> spans[] = {{0, 5}, {1, 1000}, {0, 100000000}};
  SplitMix64 rng{2028};
  int cases = 0, typed = 0;
  for (std::string line; std::getline(file, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> columns;
    for (size_t at = 0;;) {
      const size_t bar = line.find('|', at);
      columns.push_back(line.substr(at, bar - at));
      if (bar == std::string::npos) break;
      at = bar + 1;
    }
    ASSERT_EQ(columns.size(), 4u) << line;
    ASSERT_EQ(std::stoi(columns[0]), cases) << line;
    const auto [lo, span] = spans[rng.next() % 3];
    const int64_t n = 1 + int64_t(rng.next() % 40), m = 1 + int64_t(rng.next() % 12);
    std::vector<int64_t> weights;
    for (int64_t i = 0; i < n; ++i) weights.push_back(lo + int64_t(rng.next() % span));
    std::vector<std::string> types;
    for (int64_t i = 0; i < n; ++i) types.push_back(names[rng.next() % names.size()]);
    const std::string method = methods[rng.next() % methods.size()];
    const std::string what = "case " + std::to_string(cases) + " (" + std::to_string(n) +
                             " layers, " + std::to_string(m) + " stages, " + method + ")";
    EXPECT_EQ(uniform_boundaries(n, m), parse_bounds(columns[1])) << what;
    EXPECT_EQ(balanced_boundaries(weights, m), parse_bounds(columns[2])) << what;
    const PartitionMethod typed_method = parse_partition_method(method);
    if (columns[3].find("none") != std::string::npos) {
      EXPECT_THROW(type_weights(types, typed_method.type_regex), ConfigError) << what;
    } else {
      EXPECT_EQ(balanced_boundaries(type_weights(types, typed_method.type_regex), m),
                parse_bounds(columns[3]))
          << what;
      ++typed;
    }
    ++cases;
  }
  EXPECT_EQ(cases, 1200);
  EXPECT_GE(typed, 1000);
  std::printf(
      "%d layer-size vectors: uniform, balanced and type: boundaries equal DeepSpeed's "
      "(%d with a matching type)\n",
      cases, typed);
}

}  // namespace pipeline_partition_test
}  // namespace deepshard::parallel
