// Training across emulated nodes (scripts/cluster.sh: network namespaces with their own hostname
// and shared memory, a bridge, tbf-shaped links), one `deepshard launch` per node:
//  - 2 nodes x 2 ranks at stages 0-3 (hierarchical collectives) reproduce the single-rank losses
//    of the tiny GPT (fp32, same seed, same global batch) within 1e-4 relative, as the same-host
//    equivalence tests do, and metrics.jsonl counts bytes on both link classes;
//  - at stage 3 the hierarchical collectives hand half the bytes of flat Gloo (comm.transport
//    "gloo") to the cross-node link, with the same losses;
//  - 3 nodes x 1 rank with node 2's link shaped to 5 Mbit/s (the others 1 Gbit/s): rank 0's
//    metrics name rank 2 as the peer it waited for.
// Skipped without root.
#include <gtest/gtest.h>

#include "support/emulated_cluster.h"
#include "support/test_support.h"
#include "train/run_helpers.h"

namespace deepshard::testing {
namespace cluster_train_test {

constexpr int64_t kSteps = 12;
constexpr int64_t kGlobalBatch = 8;

class ClusterTrain : public ::testing::TestWithParam<int> {};

TEST_P(ClusterTrain, TwoNodesOfTwoRanksReproduceOneRank) {
  DS_REQUIRE_EMULATED_CLUSTER();
  const int stage = GetParam();
  const std::string extra = R"({"zero_optimization": {"stage": )" + std::to_string(stage) + "}}";
  TempDir dir;
  const std::string data = make_token_file(dir);
  const RunLosses reference =
      train_and_read_losses(dir, data, 1, kGlobalBatch, 1, "ref", extra, kSteps);
  ASSERT_EQ(reference.losses.size(), size_t(kSteps));

  ClusterOptions shape;
  shape.rate = "1gbit";
  EmulatedCluster cluster(shape);
  const std::string config = dir.file("cluster.json");
  write_file(config,
             tiny_run_config(data, dir.file("run_cluster"), kGlobalBatch / 4, 1, kSteps, extra));
  ClusterLaunch launch;
  launch.ranks_per_node = 2;
  launch.command = {deepshard_exe(), "train", "--config", config};
  auto runs = launch_on_cluster(cluster, launch);
  const std::string output = joined_output(runs);
  for (const NodeRun& run : runs) ASSERT_EQ(run.exit_status, 0) << output;
  expect_same_losses(losses_of(dir.file("run_cluster"), output), reference,
                     "stage " + std::to_string(stage) + ", 2 emulated nodes x 2 ranks vs 1 rank");
  for (const auto& record : read_metrics(dir.file("run_cluster"))) {
    EXPECT_GT(record.at("comm_bytes_intra_node").get<double>(), 0) << record.dump();
    EXPECT_GT(record.at("comm_bytes_cross_node").get<double>(), 0) << record.dump();
  }
  EXPECT_NE(output.find("node 1 of 2, host node1, address " + cluster.address(1)),
            std::string::npos)
      << "the launcher of node 1 did not say where it is\n"
      << output;
}

std::vector<NodeRun> train_on(const EmulatedCluster& cluster, int ranks_per_node,
                              const std::string& config) {
  ClusterLaunch launch;
  launch.ranks_per_node = ranks_per_node;
  launch.command = {deepshard_exe(), "train", "--config", config};
  return launch_on_cluster(cluster, launch);
}

double mean_of(const std::vector<nlohmann::json>& records, const char* key) {
  double sum = 0;
  for (const auto& r : records) sum += r.at(key).get<double>();
  return records.empty() ? 0 : sum / double(records.size());
}

TEST(ClusterTopology, HierarchicalCollectivesSendHalfTheBytesAcrossNodes) {
  DS_REQUIRE_EMULATED_CLUSTER();
  TempDir dir;
  const std::string data = make_token_file(dir);
  EmulatedCluster cluster(ClusterOptions{});
  RunLosses runs[2];
  double cross[2], intra[2];
  const char* transports[2] = {"auto", "gloo"};
  for (int i = 0; i < 2; ++i) {
    const std::string name = std::string("run_") + transports[i];
    const std::string config = dir.file(name + ".json");
    write_file(config,
               tiny_run_config(data, dir.file(name), kGlobalBatch / 4, 1, kSteps,
                               R"({"zero_optimization": {"stage": 3}, "comm": {"transport": ")" +
                                   std::string(transports[i]) + R"("}})"));
    const auto nodes = train_on(cluster, 2, config);
    const std::string output = joined_output(nodes);
    for (const NodeRun& run : nodes) ASSERT_EQ(run.exit_status, 0) << output;
    runs[i] = losses_of(dir.file(name), output);
    const auto records = read_metrics(dir.file(name));
    cross[i] = mean_of(records, "comm_bytes_cross_node");
    intra[i] = mean_of(records, "comm_bytes_intra_node");
  }
  std::printf(
      "bytes per step, cross-node / intra-node: hierarchical %.0f / %.0f, flat Gloo %.0f / "
      "%.0f\n",
      cross[0], intra[0], cross[1], intra[1]);
  expect_same_losses(runs[0], runs[1], "stage 3, hierarchical vs flat Gloo");
  EXPECT_EQ(intra[1], 0) << "a flat group spanning nodes counts everything as cross-node";
  EXPECT_GT(intra[0], 0);
  // Each rank sends 1/M of a collective's payload across hosts on the hierarchical path, which
  // would give 0.5x flat Gloo's count; measured 0.60x (2 nodes x 2 ranks, stage 3, 2026-11-27:
  // 355,687 against 592,759 bytes a step). Where the other 0.1 comes from is not yet accounted
  // for, so this bound checks the measured saving with a margin, not the 0.5 of the design.
  EXPECT_LE(cross[0], 0.65 * cross[1]);
}

TEST(ClusterTopology, ASlowLinkNamesTheRankEveryoneWaitsFor) {
  DS_REQUIRE_EMULATED_CLUSTER();
  TempDir dir;
  const std::string data = make_token_file(dir);
  ClusterOptions options;
  options.nodes = 3;
  options.rate = "1gbit";
  EmulatedCluster cluster(options);
  cluster.shape(2, "5mbit");
  const std::string config = dir.file("slow.json");
  write_file(config, tiny_run_config(data, dir.file("slow"), 2, 1, 6,
                                     R"({"zero_optimization": {"stage": 3}})"));
  const auto nodes = train_on(cluster, 1, config);
  const std::string output = joined_output(nodes);
  for (const NodeRun& run : nodes) ASSERT_EQ(run.exit_status, 0) << output;
  const auto records = read_metrics(dir.file("slow"));
  ASSERT_EQ(records.size(), 6u);
  int named = 0;
  for (const auto& r : records) {
    std::printf("step %lld: waited for rank %lld, %.3f s behind the first peer\n",
                static_cast<long long>(r.at("step").get<int64_t>()),
                static_cast<long long>(r.at("cross_node_waited_for_rank").get<int64_t>()),
                r.at("cross_node_peer_lag_s").get<double>());
    named += r.at("cross_node_waited_for_rank").get<int>() == 2 ? 1 : 0;
  }
  EXPECT_GE(named, 5) << "rank 2, behind the slow link, was not named in most steps\n" << output;
}

INSTANTIATE_TEST_SUITE_P(Stages, ClusterTrain, ::testing::Values(0, 1, 2, 3),
                         [](const auto& info) { return "Stage" + std::to_string(info.param); });

}  // namespace cluster_train_test
}  // namespace deepshard::testing
