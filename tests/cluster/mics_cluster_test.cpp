// MiCS across emulated nodes (2 nodes x 2 ranks, one `deepshard launch` per node, links shaped to
// 1 Gbit/s; scripts/cluster.sh), the tiny GPT in fp32 for 20 steps, same seed and global batch:
//  - mics_shard_size 2 (a shard group per node) reproduces plain stage 3's losses within 1e-6
//    relative, and moves fewer bytes across nodes per step: only the gradient shards' all-reduce
//    over the replica groups crosses (the parameter all-gathers and gradient reduce-scatters stay
//    inside the node). Counted as payload per rank, plain stage 3 hands the cross-node link about
//    P/4 of gathers (each block gathered once a step: the default reuse distance keeps it from its
//    forward to its backward) and P/2 of reduce-scatter, MiCS the P/2 gradient shard: about 2/3;
//    the bound is 0.8 (the ratio is printed);
//  - mics_shard_size 4 (one shard group spanning both nodes), with and without
//    mics_hierarchical_params_gather, reproduces them too (the key warns: its 2-hop gather is not
//    in effect yet; the bytes of both are printed).
// The measured bytes are printed. Skipped without root.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "support/cluster_run.h"
#include "support/emulated_cluster.h"
#include "support/test_support.h"
#include "train/run_helpers.h"

namespace deepshard::testing {
namespace mics_cluster_test {

constexpr int64_t kSteps = 20;

// One run of the tiny GPT with `zero` as its zero_optimization section; prints its bytes per step.
ClusterRun train_on_cluster(const EmulatedCluster& cluster, const TempDir& dir,
                            const std::string& data, const std::string& name,
                            const std::string& zero) {
  ClusterRun out = train_tiny_on_cluster(cluster, dir, data, name, kSteps,
                                         R"({"zero_optimization": )" + zero + "}");
  std::printf("%s: bytes per step, cross-node %.0f, intra-node %.0f\n", name.c_str(),
              out.cross_bytes / kSteps, out.intra_bytes / kSteps);
  return out;
}

// Every loss of `run` within `bound` relative of `reference`'s; returns the largest difference.
double expect_losses_within(const ClusterRun& run, const ClusterRun& reference, double bound,
                            const std::string& what) {
  EXPECT_EQ(run.losses.losses.size(), size_t(kSteps)) << what;
  EXPECT_EQ(reference.losses.losses.size(), size_t(kSteps)) << what;
  double worst = 0;
  const size_t n = std::min(run.losses.losses.size(), reference.losses.losses.size());
  for (size_t i = 0; i < n; ++i) {
    const double want = reference.losses.losses[i];
    const double rel = std::abs(run.losses.losses[i] - want) / std::abs(want);
    worst = std::max(worst, rel);
    EXPECT_LE(rel, bound) << what << ", step " << i + 1;
  }
  std::printf("%s: largest relative loss difference %.3g over %zu steps\n", what.c_str(), worst, n);
  return worst;
}

TEST(MicsCluster, ShardGroupsPerNodeReproducePlainStage3AndCrossLess) {
  DS_REQUIRE_EMULATED_CLUSTER();
  TempDir dir;
  const std::string data = make_token_file(dir);
  ClusterOptions shape;
  shape.rate = "1gbit";
  EmulatedCluster cluster(shape);
  const ClusterRun plain = train_on_cluster(cluster, dir, data, "plain", R"({"stage": 3})");
  const ClusterRun mics =
      train_on_cluster(cluster, dir, data, "mics2", R"({"stage": 3, "mics_shard_size": 2})");
  expect_losses_within(mics, plain, 1e-6, "mics_shard_size 2 vs plain stage 3");
  ASSERT_GT(plain.cross_bytes, 0);
  const double ratio = mics.cross_bytes / plain.cross_bytes;
  std::printf("MiCS shard size 2: cross-node bytes per step %.3fx plain stage 3's\n", ratio);
  EXPECT_LE(ratio, 0.8);
  EXPECT_GT(mics.cross_bytes, 0) << "the gradient all-reduce over the replica groups crosses nodes";

  const ClusterRun two_hop = train_on_cluster(
      cluster, dir, data, "mics4_hier",
      R"({"stage": 3, "mics_shard_size": 4, "mics_hierarchical_params_gather": true})");
  const ClusterRun flat =
      train_on_cluster(cluster, dir, data, "mics4_flat", R"({"stage": 3, "mics_shard_size": 4})");
  expect_losses_within(two_hop, plain, 1e-6, "mics_shard_size 4, 2-hop gather vs plain stage 3");
  expect_losses_within(flat, plain, 1e-6, "mics_shard_size 4, flat vs plain stage 3");
  std::printf("MiCS shard size 4: cross-node bytes per step, 2-hop %.0f, flat %.0f\n",
              two_hop.cross_bytes / kSteps, flat.cross_bytes / kSteps);
  // mics_hierarchical_params_gather warns that it is not 2-hop yet (config/mics_check.cpp): the
  // 2-hop gather would send fewer bytes across nodes than the flat one; measured equal.
}

}  // namespace mics_cluster_test
}  // namespace deepshard::testing
