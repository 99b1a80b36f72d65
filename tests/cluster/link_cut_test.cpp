// A network cut in the middle of a step: 2 emulated nodes x 2 ranks train the tiny GPT (stage 2,
// saving every 3 steps) over 20 Mbit/s links, so that every step spends most of its time in
// collectives; once a checkpoint exists, node 1's link is taken down (its veth port on the
// bridge). Every rank must stop within 30 s, naming what it lost (node 0's ranks: a rank of node 1
// and its address; node 1's ranks: rank 0, whose store stopped answering), and both launchers
// exit non-zero. With the link restored, `train.resume: auto` continues from the latest
// checkpoint, and its losses equal those of an uninterrupted run on the same cluster bit for bit.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <thread>

#include "support/emulated_cluster.h"
#include "support/test_support.h"
#include "train/run_helpers.h"

namespace deepshard::testing {
namespace link_cut_test {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int64_t kSteps = 16;
constexpr int64_t kSaveInterval = 3;

std::string config_of(const TempDir& dir, const std::string& data, const std::string& name,
                      const std::string& ckpt) {
  nlohmann::json extra = {{"zero_optimization", {{"stage", 2}}},
                          {"train", {{"log_interval", 1}}},
                          {"comm", {{"timeout_s", 120}}}};
  if (!ckpt.empty()) {
    extra["train"]["checkpoint_dir"] = ckpt;
    extra["train"]["save_interval"] = kSaveInterval;
    extra["train"]["resume"] = "auto";
  }
  const std::string path = dir.file(name + ".json");
  write_file(path, tiny_run_config(data, dir.file(name), 2, 1, kSteps, extra.dump()));
  return path;
}

std::vector<NodeRun> train_on(const EmulatedCluster& cluster, const std::string& config) {
  ClusterLaunch launch;
  launch.ranks_per_node = 2;
  launch.command = {deepshard_exe(), "train", "--config", config};
  launch.timeout_s = 240;
  return launch_on_cluster(cluster, launch);
}

// Lines of `output` from rank `rank` ("[rank R] ...") that say what the job lost.
bool rank_names_a_loss(const std::string& output, int rank) {
  const std::string prefix = "[rank " + std::to_string(rank) + "] ";
  for (size_t at = output.find(prefix); at != std::string::npos; at = output.find(prefix, at + 1)) {
    const std::string line = output.substr(at, output.find('\n', at) - at);
    if (line.find("was lost") != std::string::npos) return true;
  }
  return false;
}

TEST(LinkCut, EveryRankStopsNamingWhatItLostAndTheCheckpointResumes) {
  DS_REQUIRE_EMULATED_CLUSTER();
  TempDir dir;
  const std::string data = make_token_file(dir);
  ClusterOptions options;
  options.rate = "20mbit";
  EmulatedCluster cluster(options);

  const auto full = train_on(cluster, config_of(dir, data, "full", ""));
  for (const NodeRun& run : full) ASSERT_EQ(run.exit_status, 0) << joined_output(full);
  const auto reference = read_metrics(dir.file("full"));
  ASSERT_EQ(reference.size(), size_t(kSteps));

  const std::string ckpt = dir.file("ckpt");
  const std::string config = config_of(dir, data, "cut", ckpt);
  auto running = std::async(std::launch::async, [&] { return train_on(cluster, config); });
  const auto started = Clock::now();
  while (!fs::exists(ckpt + "/latest") && Clock::now() - started < std::chrono::seconds(180) &&
         running.wait_for(std::chrono::milliseconds(20)) != std::future_status::ready) {
  }
  ASSERT_TRUE(fs::exists(ckpt + "/latest")) << "no checkpoint before the run ended";
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // into the next step
  const auto cut_at = Clock::now();
  cluster.set_link(1, false);
  const auto runs = running.get();
  const std::string output = joined_output(runs);
  for (size_t node = 0; node < runs.size(); ++node) {
    const double stop_s = std::chrono::duration<double>(runs[node].ended - cut_at).count();
    std::printf("node %zu stopped %.1f s after the cut, status %d\n", node, stop_s,
                runs[node].exit_status);
    EXPECT_NE(runs[node].exit_status, 0) << output;
    EXPECT_NE(runs[node].exit_status, -1) << "node " << node << " did not stop\n" << output;
    EXPECT_LT(stop_s, 30.0) << "node " << node << "\n" << output;
  }
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_TRUE(rank_names_a_loss(runs[size_t(rank / 2)].output, rank))
        << "rank " << rank << " did not say what it lost\n"
        << output;
  }
  EXPECT_NE(runs[0].output.find(cluster.address(1)), std::string::npos)
      << "node 0 did not name node 1's address\n"
      << output;
  EXPECT_NE(runs[1].output.find("rank 0 was lost"), std::string::npos) << output;
  const size_t logged = read_metrics(dir.file("cut")).size();
  ASSERT_LT(logged, size_t(kSteps)) << "the cut came after the run ended";

  cluster.set_link(1, true);
  const std::string resume_config = config_of(dir, data, "resumed", ckpt);
  const auto resumed = train_on(cluster, resume_config);
  for (const NodeRun& run : resumed) ASSERT_EQ(run.exit_status, 0) << joined_output(resumed);
  const auto after = read_metrics(dir.file("resumed"));
  ASSERT_FALSE(after.empty());
  const int64_t first = after.front().at("step").get<int64_t>();
  EXPECT_EQ((first - 1) % kSaveInterval, 0) << "resumed after step " << first - 1;
  EXPECT_GT(first, 1) << "the resumed run started from scratch";
  EXPECT_EQ(after.back().at("step").get<int64_t>(), kSteps);
  for (const auto& m : after) {
    const auto step = m.at("step").get<int64_t>();
    EXPECT_EQ(m.at("loss").get<double>(), reference[size_t(step - 1)].at("loss").get<double>())
        << "step " << step;
  }
  std::printf(
      "cut after %zu logged steps; resumed from step %lld, steps %lld-%lld equal the "
      "uninterrupted run bit for bit\n",
      logged, static_cast<long long>(first - 1), static_cast<long long>(first),
      static_cast<long long>(kSteps));
}

}  // namespace link_cut_test
}  // namespace deepshard::testing
