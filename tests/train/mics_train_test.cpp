// MiCS (zero_optimization.mics_shard_size, zero/stage3/mics_groups.h) with real ranks on one host:
//  - N = 4 ranks in two shard groups of 2 (accumulation 2) and N = 3 ranks with shard size 1
//    (every rank a whole replica, the gradients all-reduced over 3) reproduce the single-rank
//    losses of the tiny GPT (fp32, same seed, global batch 24, clipping on) for 20 steps within
//    1e-4 relative, as plain stage 3 does; each rank of the N = 4 run holds 1/2 of the model
//    states (the shard group's slice), not 1/4;
//  - a shard size that does not divide the job is refused before training, naming the key, and
//    mics_hierarchical_params_gather with shard groups inside one node is refused naming both keys;
//  - checkpoints: a run saved at N = 4 with shard size 2 resumes with MiCS bit for bit, and loads
//    at plain stage 3 with N = 2 and N = 3 (resharded) within 1e-4 of the single-rank run.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "support/test_support.h"
#include "train/run_helpers.h"

namespace deepshard::testing {
namespace mics_train_test {

namespace fs = std::filesystem;

constexpr int64_t kGlobalBatch = 24;
// The tiny GPT's blocks (two of them; the root holds the rest).
constexpr int64_t kTinyBlock = 12 * 64 * 64 + 13 * 64;

// A stage-3 run's sections with mics_shard_size `shard` (0: plain stage 3), merged with `train`.
std::string mics(int64_t shard, const nlohmann::json& train = nlohmann::json::object()) {
  nlohmann::json j = {{"zero_optimization", {{"stage", 3}}}};
  if (shard > 0) j["zero_optimization"]["mics_shard_size"] = shard;
  if (!train.empty()) j["train"] = train;
  return j.dump();
}

int64_t padded(int64_t numel, int ranks) { return (numel + ranks - 1) / ranks * ranks; }

TEST(MicsTrain, ReproducesSingleRankLosses) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  const RunLosses reference = train_and_read_losses(dir, data, 1, kGlobalBatch, 1, "ref");
  ASSERT_EQ(reference.losses.size(), 20u);
  EXPECT_TRUE(reference.clipped) << "gradient clipping never took effect";

  const RunLosses n4 = train_and_read_losses(dir, data, 4, kGlobalBatch / 8, 2, "n4s2", mics(2));
  expect_same_losses(n4, reference, "MiCS N=4, shard size 2, accumulation 2 vs 1 rank");
  EXPECT_NE(n4.output.find("MiCS: 2 shard groups of 2 consecutive ranks"), std::string::npos)
      << n4.output;
  const RunLosses n3 = train_and_read_losses(dir, data, 3, kGlobalBatch / 3, 1, "n3s1", mics(1));
  expect_same_losses(n3, reference, "MiCS N=3, shard size 1 vs 1 rank");

  // The model states of a rank of the N=4 run: its shard group's slice of every unit (1/2).
  const auto summary = nlohmann::json::parse(read_file(dir.file("run_n4s2") + "/summary.json"));
  const int64_t params = summary.at("num_parameters");
  const int64_t root = params - 2 * kTinyBlock;
  const int64_t shard_bytes = 4 * (padded(root, 2) + 2 * padded(kTinyBlock, 2)) / 2;
  const auto& ledger = summary.at("ledger_bytes_rank0");
  EXPECT_EQ(ledger.at("parameters").get<int64_t>(), shard_bytes);
  EXPECT_EQ(ledger.at("gradients").get<int64_t>(), shard_bytes);
  EXPECT_EQ(ledger.at("optimizer_state").get<int64_t>(), 2 * shard_bytes);
  std::printf("MiCS N=4, shard size 2: %lld parameter bytes per rank of %lld\n",
              static_cast<long long>(shard_bytes), static_cast<long long>(4 * params));
}

TEST(MicsTrain, ShardSizeNotDividingTheJobIsRefused) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  const std::string config = dir.file("bad.json");
  write_file(config, tiny_run_config(data, dir.file("run_bad"), 8, 1, 2, mics(2)));
  const auto r = run_ranks(3, deepshard_exe(), {"train", "--config", config}, 120);
  EXPECT_NE(r.exit_status, 0) << r.output;
  EXPECT_NE(r.output.find("zero_optimization.mics_shard_size"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("2 does not divide the job's 3 data-parallel ranks"), std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(dir.file("run_bad") + "/metrics.jsonl"));
}

// On one host every shard group is inside the node: the 2-hop gather has nothing to do.
TEST(MicsTrain, HierarchicalGatherInsideOneNodeIsRefused) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  const std::string config = dir.file("hier.json");
  write_file(config, tiny_run_config(data, dir.file("run_hier"), 2, 1, 2,
                                     R"({"zero_optimization": {"stage": 3, "mics_shard_size": 2, )"
                                     R"("mics_hierarchical_params_gather": true}})"));
  const auto r = run_ranks(4, deepshard_exe(), {"train", "--config", config}, 120);
  EXPECT_NE(r.exit_status, 0) << r.output;
  EXPECT_NE(r.output.find("zero_optimization.mics_hierarchical_params_gather needs shard groups "
                          "of whole nodes spanning more than one"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("inside one node"), std::string::npos) << r.output;
}

// Trains `steps` steps with `ranks` ranks (global batch 12: micro 12 / ranks).
struct TrainRun {
  int status = 0;
  std::string output;
  std::vector<nlohmann::json> metrics;
};
TrainRun train(const TempDir& dir, const std::string& data, const std::string& name, int ranks,
               int64_t steps, const std::string& extra) {
  const std::string run_dir = dir.file("run_" + name);
  const std::string config = dir.file(name + ".json");
  write_file(config, tiny_run_config(data, run_dir, 12 / ranks, 1, steps, extra));
  const auto r = run_ranks(ranks, deepshard_exe(), {"train", "--config", config}, 300);
  TrainRun out{r.exit_status, r.output, {}};
  if (fs::exists(run_dir + "/metrics.jsonl")) out.metrics = read_metrics(run_dir);
  return out;
}

RunLosses losses(std::initializer_list<const TrainRun*> runs) {
  RunLosses out;
  for (const TrainRun* r : runs)
    for (const auto& m : r->metrics) out.losses.push_back(m.at("loss").get<double>());
  return out;
}

TEST(MicsCheckpoint, ResumesExactlyAndReshardsToPlainStage3) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  const std::string ckpt = dir.file("ckpt");
  const TrainRun reference =
      train(dir, data, "ref", 1, 20, R"({"zero_optimization": {"stage": 0}})");
  ASSERT_EQ(reference.status, 0) << reference.output;
  const TrainRun full = train(dir, data, "full", 4, 20, mics(2));
  ASSERT_EQ(full.status, 0) << full.output;
  const TrainRun first =
      train(dir, data, "first", 4, 10, mics(2, {{"checkpoint_dir", ckpt}, {"save_interval", 10}}));
  ASSERT_EQ(first.status, 0) << first.output;
  ASSERT_TRUE(fs::exists(ckpt + "/step10/manifest.json"));
  // Replica group 0 (ranks 0 and 1) wrote the pieces; ranks 2 and 3 wrote empty shard files.
  const auto manifest = nlohmann::json::parse(read_file(ckpt + "/step10/manifest.json"));
  EXPECT_EQ(manifest.at("world_size").get<int>(), 4);
  EXPECT_EQ(manifest.at("zero_stage").get<int>(), 3);

  const TrainRun resumed =
      train(dir, data, "resumed", 4, 20, mics(2, {{"checkpoint_dir", ckpt}, {"resume", "auto"}}));
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  ASSERT_EQ(full.metrics.size(), 20u);
  ASSERT_EQ(resumed.metrics.size(), 10u) << resumed.output;
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(resumed.metrics[i].at("loss").get<double>(),
              full.metrics[10 + i].at("loss").get<double>())
        << "step " << 11 + i;
  }
  std::printf(
      "MiCS N=4 shard 2: steps 11-20 after resume equal the uninterrupted run bit for bit\n");

  const RunLosses ref = losses({&reference});
  expect_same_losses(losses({&full}), ref, "MiCS N=4 shard 2 vs 1 rank");
  for (int ranks : {2, 3}) {
    const TrainRun plain = train(dir, data, "plain" + std::to_string(ranks), ranks, 20,
                                 mics(0, {{"resume", ckpt + "/step10"}}));
    ASSERT_EQ(plain.status, 0) << plain.output;
    expect_same_losses(losses({&first, &plain}), ref,
                       "MiCS N=4 shard 2 -> plain stage 3 N=" + std::to_string(ranks));
  }
}

}  // namespace mics_train_test
}  // namespace deepshard::testing
