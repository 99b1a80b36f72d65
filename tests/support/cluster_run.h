// The cluster tests' training run (hpZ, MiCS): the tiny GPT trained with a run config on every node
// of an emulated cluster (2 ranks per node), read back from rank 0's run folder.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/emulated_cluster.h"
#include "support/test_support.h"
#include "train/run_helpers.h"

namespace deepshard::testing {

struct ClusterRun {
  RunLosses losses;        // empty when a node failed (the test has failed then)
  double cross_bytes = 0;  // rank 0's cross-node bytes over the run (metrics.jsonl)
  double intra_bytes = 0;  // rank 0's intra-node bytes over the run
  nlohmann::json summary;  // rank 0's summary.json
};

// Trains `steps` steps of the tiny GPT (micro-batch 2, run_helpers' config + `extra`) in run
// folder <dir>/<name> on every node, within 300 s.
inline ClusterRun train_tiny_on_cluster(const EmulatedCluster& cluster, const TempDir& dir,
                                        const std::string& data, const std::string& name,
                                        int64_t steps, const std::string& extra) {
  const std::string config = dir.file(name + ".json");
  write_file(config, tiny_run_config(data, dir.file(name), 2, 1, steps, extra));
  ClusterLaunch launch;
  launch.ranks_per_node = 2;
  launch.command = {deepshard_exe(), "train", "--config", config};
  launch.timeout_s = 300;  // the launcher default: runs on a loaded machine take well over 60 s
  const auto nodes = launch_on_cluster(cluster, launch);
  const std::string output = joined_output(nodes);
  ClusterRun out;
  for (const NodeRun& run : nodes) {
    EXPECT_EQ(run.exit_status, 0) << output;
    if (run.exit_status != 0) return out;
  }
  out.losses = losses_of(dir.file(name), output);
  for (const auto& record : read_metrics(dir.file(name))) {
    out.cross_bytes += record.at("comm_bytes_cross_node").get<double>();
    out.intra_bytes += record.at("comm_bytes_intra_node").get<double>();
  }
  out.summary = nlohmann::json::parse(read_file(dir.file(name) + "/summary.json"));
  return out;
}

}  // namespace deepshard::testing
