// RankGrid arithmetic (one process): Megatron order (tensor fastest, then data, then pipeline),
// members and group indices of every axis, the errors, and the config's data-parallel size.
#include "parallel/rank_grid.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "deepshard/config/loader.h"
#include "deepshard/config/parallel_config.h"
#include "deepshard/util/error.h"
#include "parallel/process_groups.h"

namespace deepshard::parallel {
namespace rank_grid_test {

TEST(RankGrid, TensorRanksAreAdjacentThenDataThenPipeline) {
  RankGrid grid(8, 2, 2);  // data 2 x pipeline 2 x tensor 2
  EXPECT_EQ(grid.data_size(), 2);
  EXPECT_EQ((grid.coord(0)), (GridCoord{0, 0, 0}));
  EXPECT_EQ((grid.coord(1)), (GridCoord{0, 0, 1}));
  EXPECT_EQ((grid.coord(2)), (GridCoord{1, 0, 0}));
  EXPECT_EQ((grid.coord(3)), (GridCoord{1, 0, 1}));
  EXPECT_EQ((grid.coord(4)), (GridCoord{0, 1, 0}));
  EXPECT_EQ((grid.coord(7)), (GridCoord{1, 1, 1}));
  for (int r = 0; r < 8; ++r) EXPECT_EQ(grid.rank(grid.coord(r)), r);
  EXPECT_EQ(grid.members(Axis::kTensor, 5), (std::vector<int>{4, 5}));
  EXPECT_EQ(grid.members(Axis::kData, 5), (std::vector<int>{5, 7}));
  EXPECT_EQ(grid.members(Axis::kPipeline, 5), (std::vector<int>{1, 5}));
}

TEST(RankGrid, EveryAxisPartitionsTheWorld) {
  for (auto [world, pp, tp] : std::vector<std::tuple<int, int, int>>{
           {1, 1, 1}, {4, 1, 2}, {4, 2, 1}, {8, 2, 2}, {12, 3, 2}, {16, 2, 4}}) {
    RankGrid grid(world, pp, tp);
    EXPECT_EQ(grid.data_size() * pp * tp, world);
    for (Axis axis : {Axis::kData, Axis::kPipeline, Axis::kTensor}) {
      std::set<int> seen;
      std::set<int> indices;
      for (int r = 0; r < world; ++r) {
        std::vector<int> m = grid.members(axis, r);
        ASSERT_EQ(static_cast<int>(m.size()), grid.size(axis));
        // this rank sits at its own coordinate along the axis
        GridCoord c = grid.coord(r);
        int pos = axis == Axis::kData ? c.data : axis == Axis::kPipeline ? c.pipeline : c.tensor;
        EXPECT_EQ(m[pos], r);
        for (int other : m) EXPECT_EQ(grid.members(axis, other), m);  // same group seen alike
        for (int other : m) EXPECT_EQ(grid.group_index(axis, other), grid.group_index(axis, r));
        if (m.front() == r) {
          for (int other : m) EXPECT_TRUE(seen.insert(other).second) << other;
          EXPECT_TRUE(indices.insert(grid.group_index(axis, r)).second);
        }
      }
      EXPECT_EQ(static_cast<int>(seen.size()), world);
      EXPECT_EQ(static_cast<int>(indices.size()), world / grid.size(axis));
      EXPECT_EQ(*indices.rbegin(), world / grid.size(axis) - 1);
    }
  }
}

TEST(RankGrid, Describe) {
  EXPECT_EQ(RankGrid(4, 1, 2).describe(),
            "world 4 = data 2 x pipeline 1 x tensor 2; tensor groups [0 1] [2 3]; data groups "
            "[0 2] [1 3]; pipeline groups [0] [1] [2] [3]");
}

TEST(RankGrid, RefusesSizesThatDoNotDivideTheWorld) {
  try {
    RankGrid(6, 4, 1);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("pipeline.stages: the job's 6 ranks are not divisible"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(RankGrid(4, 1, 3), ConfigError);
  EXPECT_THROW(RankGrid(4, 0, 1), ConfigError);
  EXPECT_THROW(RankGrid(4, 1, 0), ConfigError);
}

config::DsConfig parse(const nlohmann::json& j, int world) {
  config::ResolveContext context;
  context.dp_world_size = world;
  return config::parse_ds_config(j, context, nullptr);
}

TEST(ParallelConfig, BatchTripleCountsDataParallelReplicas) {
  // 8 ranks = data 2 x pipeline 2 x tensor 2: train_batch_size 8 = micro 2 x accumulation 2 x dp 2
  nlohmann::json j = {{"train_batch_size", 8},
                      {"train_micro_batch_size_per_gpu", 2},
                      {"pipeline", {{"enabled", true}, {"stages", 2}, {"partition", "uniform"}}},
                      {"tensor_parallel", {{"enabled", true}, {"size", 2}}}};
  config::DsConfig c = parse(j, 8);
  EXPECT_EQ(c.gradient_accumulation_steps, 2);
  const config::ParallelConfig parallel = config::parse_parallel_config(j);
  EXPECT_EQ(parallel.pipeline.partition, "uniform");
  RankGrid grid = grid_from_config(parallel, 8);
  EXPECT_EQ(grid.data_size(), 2);
  // disabled sections do not count: 8 = micro 1 x accumulation 1 x dp 8
  j["train_micro_batch_size_per_gpu"] = 1;
  EXPECT_EQ(parse(j, 8).gradient_accumulation_steps, 4);
  j["pipeline"]["enabled"] = false;
  j["tensor_parallel"]["enabled"] = false;
  EXPECT_EQ(parse(j, 8).gradient_accumulation_steps, 1);
  EXPECT_EQ(grid_from_config(config::parse_parallel_config(j), 8).data_size(), 8);
}

TEST(ParallelConfig, StrictKeysAndClearErrors) {
  auto error_of = [](const nlohmann::json& j, int world) {
    try {
      parse(j, world);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  nlohmann::json base = {{"train_batch_size", 4}};
  nlohmann::json j = base;
  j["pipeline"] = {{"stages", 2}, {"partition", "profile"}};
  EXPECT_NE(error_of(j, 4).find("pipeline.partition: \"profile\" is not a partition method"),
            std::string::npos)
      << error_of(j, 4);
  j["pipeline"] = {{"stages", 2}, {"partition_method", "type:(x"}};
  EXPECT_NE(error_of(j, 4).find("pipeline.partition_method: \"type:(x\" is not a valid regular "
                                "expression"),
            std::string::npos)
      << error_of(j, 4);
  j["pipeline"] = {{"stages", 2}, {"partition", "uniform"}, {"partition_method", "uniform"}};
  EXPECT_NE(error_of(j, 4).find("pipeline.partition"), std::string::npos) << error_of(j, 4);
  j["pipeline"] = {{"stages", 2}, {"activation_checkpoint_interval", -1}};
  EXPECT_NE(error_of(j, 4).find("pipeline.activation_checkpoint_interval"), std::string::npos)
      << error_of(j, 4);
  j["pipeline"] = {{"stages", 2}, {"seed_layer", true}};
  EXPECT_NE(error_of(j, 4).find("pipeline.seed_layer"), std::string::npos) << error_of(j, 4);
  j = base;
  j["tensor_parallel"] = {{"enabled", true}, {"size", 3}};
  EXPECT_NE(error_of(j, 4).find("tensor_parallel.size: the job's 4 ranks are not divisible"),
            std::string::npos)
      << error_of(j, 4);
  j = base;
  j["tensor_parallel"] = {{"enabled", true}, {"size", 0}};
  EXPECT_NE(error_of(j, 4).find("tensor_parallel.size"), std::string::npos) << error_of(j, 4);
}

// Both axes train in fp32, bf16 and fp16.
TEST(ParallelConfig, SizesAboveOneTrainInEveryPrecision) {
  nlohmann::json j = {{"train_batch_size", 4},
                      {"pipeline", {{"enabled", true}, {"stages", 2}}},
                      {"tensor_parallel", {{"enabled", true}, {"size", 2}}}};
  EXPECT_TRUE(config::unsupported_features(parse(j, 4)).empty());
  j["bf16"] = {{"enabled", true}};
  EXPECT_TRUE(config::unsupported_features(parse(j, 4)).empty());
  j.erase("bf16");
  j["pipeline"]["stages"] = 1;
  j["tensor_parallel"]["size"] = 1;
  EXPECT_TRUE(config::unsupported_features(parse(j, 4)).empty());
}

// DeepSpeed's pipeline dict as DeepSpeed reads it: stages > 1 is a pipeline (no "enabled" needed;
// "enabled" accepted), partition normalised as DeepSpeed does, partition_method a deprecated
// alias, and every key deepshard cannot do as DeepSpeed does warns naming itself.
TEST(ParallelConfig, DeepSpeedPipelineKeys) {
  auto read = [](const nlohmann::json& pipeline, std::vector<std::string>* warnings,
                 const nlohmann::json& tensor = nullptr) {
    nlohmann::json j = {{"train_micro_batch_size_per_gpu", 1}, {"pipeline", pipeline}};
    if (!tensor.is_null()) j["tensor_parallel"] = tensor;
    config::ResolveContext context;
    context.dp_world_size = 8;
    config::parse_ds_config(j, context, warnings);
    return config::parse_parallel_config(j);
  };
  std::vector<std::string> w;
  config::ParallelConfig p = read({{"stages", 4}}, &w);
  EXPECT_TRUE(p.pipeline.enabled);
  EXPECT_EQ(p.pipeline.effective_stages(), 4);
  EXPECT_EQ(p.pipeline.partition, "parameters");  // PipelineModule's default
  EXPECT_TRUE(w.empty()) << w.front();
  EXPECT_FALSE(read({{"stages", 1}}, &w).pipeline.enabled);
  EXPECT_EQ(read({{"enabled", false}, {"stages", 4}}, &w).pipeline.effective_stages(), 1);
  // The hybrid block of the system deepshard follows.
  p = read({{"enabled", true}, {"partition", "uniform"}, {"stages", 4}}, &w);
  EXPECT_EQ(p.pipeline.effective_stages(), 4);
  EXPECT_EQ(p.pipeline.partition, "uniform");
  EXPECT_TRUE(w.empty()) << w.front();
  EXPECT_EQ(read({{"stages", 2}, {"partition", "Type:TransformerLayer:x"}}, &w).pipeline.partition,
            "type:transformerlayer");
  EXPECT_TRUE(w.empty()) << w.front();

  p = read({{"stages", 2}, {"partition_method", "uniform"}}, &w);
  EXPECT_EQ(p.pipeline.partition, "uniform");
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("pipeline.partition_method: deprecated name of pipeline.partition"),
            std::string::npos)
      << w[0];

  w.clear();
  p = read({{"stages", 2},
            {"seed_layers", true},
            {"activation_checkpoint_interval", 2},
            {"pipe_partitioned", true},
            {"grad_partitioned", false}},
           &w, {{"size", 2}});
  EXPECT_TRUE(p.pipeline.seed_layers);
  EXPECT_EQ(p.pipeline.activation_checkpoint_interval, 2);
  EXPECT_TRUE(p.pipeline.pipe_partitioned);
  EXPECT_FALSE(p.pipeline.grad_partitioned);
  ASSERT_EQ(w.size(), 3u);
  EXPECT_NE(w[0].find("pipeline.seed_layers: true has no effect"), std::string::npos) << w[0];
  EXPECT_NE(w[1].find("pipeline.activation_checkpoint_interval: 2: each block is recomputed on "
                      "its own"),
            std::string::npos)
      << w[1];
  EXPECT_NE(w[2].find("pipeline.pipe_partitioned: true has no effect: each tensor rank of a stage "
                      "sends the whole activation"),
            std::string::npos)
      << w[2];
  // Without tensor parallelism DeepSpeed partitions nothing either; interval 1 is what deepshard
  // recomputes (every block).
  w.clear();
  read({{"stages", 2}, {"pipe_partitioned", true}, {"activation_checkpoint_interval", 1}}, &w);
  EXPECT_TRUE(w.empty()) << w.front();
  // Without a pipeline the keys do nothing.
  read({{"stages", 1}, {"activation_checkpoint_interval", 1}}, &w);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_NE(w[0].find("pipeline.activation_checkpoint_interval: has no effect without a pipeline"),
            std::string::npos)
      << w[0];
}

}  // namespace rank_grid_test
}  // namespace deepshard::parallel
