// ZeRO++ quantized gradients across emulated nodes (2 nodes x 2 ranks, links shaped to 1 Gbit/s):
// with zero_quantized_gradients stage 3 reduces each unit's gradients hierarchically (int8
// all-to-all inside the node, the partial sums requantized and exchanged across nodes) and tracks
// plain stage 3's loss within the budget (the mean of the last 5 of 20 steps within 1 %), while
// the gradients' cross-node bytes are at most 0.3x of plain stage 3's: the job's cross-node bytes
// fall by exactly the fp32 reduce-scatters' cross-node stage (each rank's K slices of every unit,
// fp32) less the quantized cross-node stage (the same K slices as int8 plus a scale per block).
// Skipped without root.
#include <gtest/gtest.h>

#include "support/cluster_run.h"
#include "zero/stage3/quantized_reduce.h"
#include "zeropp/released_stage3.h"
#include "zeropp/zeropp_checks.h"

namespace deepshard::testing {
namespace qgz_cluster_test {

constexpr int64_t kSteps = 20;
constexpr int kNodes = 2, kPerNode = 2;

ClusterRun train_stage3(const EmulatedCluster& cluster, const TempDir& dir, const std::string& data,
                        const std::string& name, bool quantized) {
  return train_tiny_on_cluster(cluster, dir, data, name, kSteps,
                               released_stage3({{"zero_quantized_gradients", quantized}}));
}

TEST(ClusterQuantizedGradients, CrossNodeGradientBytesAtMostThreeTenths) {
  DS_REQUIRE_EMULATED_CLUSTER();
  EmulatedCluster cluster(ClusterOptions{.rate = "1gbit"});
  TempDir dir;
  const std::string data = make_token_file(dir);
  const ClusterRun plain = train_stage3(cluster, dir, data, "plain", false);
  const ClusterRun qgz = train_stage3(cluster, dir, data, "qgz", true);
  const double rel = expect_within_loss_budget(plain.losses, qgz.losses, "quantized gradients");

  // Plain stage 3's gradient reductions (the comms logger: calls by the bytes of the unit's full
  // fp32 gradients, U * 4) sent, in their cross-node stage, this rank's K slices: U / M fp32
  // values each; the quantized run sends the same K slices (c = U / N each) as int8 plus scales.
  double fp32_cross = 0, int8_cross = 0;
  for (const auto& [size, stats] : plain.summary.at("comms_logger").at("reduce_scatter").items()) {
    const int64_t unit = std::stoll(size) / 4, count = stats.at("count").get<int64_t>();
    fp32_cross += double(count) * double(unit / kPerNode * 4);
    int8_cross += double(count) * double(zero::QuantizedReduceScatter::wire_bytes(
                                      kNodes, unit / (kNodes * kPerNode)));
  }
  ASSERT_GT(fp32_cross, 0);
  const double ratio = int8_cross / fp32_cross;
  std::printf(
      "cross-node bytes over %lld steps (rank 0): plain stage 3 %.0f, quantized gradients %.0f; "
      "gradients %.0f -> %.0f (%.4fx); final loss %.2f %% off\n",
      static_cast<long long>(kSteps), plain.cross_bytes, qgz.cross_bytes, fp32_cross, int8_cross,
      ratio, 100 * rel);
  EXPECT_EQ(plain.cross_bytes - qgz.cross_bytes, fp32_cross - int8_cross);
  EXPECT_LE(ratio, 0.3);
}

}  // namespace qgz_cluster_test
}  // namespace deepshard::testing
