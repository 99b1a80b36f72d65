// ZeRO++ hpZ (zero_hpz_partition_size) on one host with real ranks: the secondary partition moves
// where later gathers read from, never the values, so N = 2, 3 and 4 ranks with hpZ groups of all
// the ranks (the ranks of the node) and N = 4 with groups of 2 reproduce plain stage 3's losses
// within 1e-6 relative (fp32, 20 steps, accumulation 2, prefetch on, blocks released after use);
// every gather of a released block until the step (its backward, the second micro-batch's forward
// and backward) runs over the hpZ group, counted by the comms logger. Checkpoints do not depend on
// hpZ: a run with it resumes bit for bit, and its checkpoint reshards onto other world sizes with
// and without it. A size that does not divide the ranks is refused naming the key.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "support/test_support.h"
#include "train/run_helpers.h"
#include "zeropp/released_stage3.h"

namespace deepshard::testing {
namespace stage3_hpz_test {

constexpr int64_t kGlobalBatch = 72;  // divisible by N * accumulation for N in {1..4}, {1, 2, 3}
constexpr int64_t kSteps = 20;
constexpr int64_t kBlocks = 2;  // the tiny GPT's

// Released stage 3 with `hpz` (1: off).
std::string stage3(int64_t hpz, const std::string& more = "{}") {
  return released_stage3({{"zero_hpz_partition_size", hpz}}, more);
}

// Every loss within 1e-6 relative of the reference's.
void expect_losses_within_1e6(const RunLosses& run, const RunLosses& reference,
                              const std::string& what) {
  ASSERT_EQ(run.losses.size(), reference.losses.size()) << what;
  double max_rel = 0;
  for (size_t i = 0; i < run.losses.size(); ++i) {
    const double rel =
        std::abs(run.losses[i] - reference.losses[i]) / std::abs(reference.losses[i]);
    max_rel = std::max(max_rel, rel);
    EXPECT_LE(rel, 1e-6) << what << ", step " << i + 1;
  }
  std::printf("%s: max relative loss difference %.2e over %zu steps\n", what.c_str(), max_rel,
              run.losses.size());
}

// The tiny GPT's blocks: 12 * 64 * 64 + 13 * 64 elements each (fp32), padded to a multiple of N.
constexpr int64_t kTinyBlock = 12 * 64 * 64 + 13 * 64;

// How many all-gathers of `bytes` rank 0's job group ran (the comms logger's detail, into which
// the hpZ group's collectives are recorded).
int64_t all_gathers_of(const TempDir& dir, const std::string& name, int64_t bytes) {
  const auto summary = nlohmann::json::parse(read_file(dir.file("run_" + name) + "/summary.json"));
  const auto& sizes = summary.at("comms_logger").at("all_gather");
  const std::string key = std::to_string(bytes);
  return sizes.contains(key) ? sizes.at(key).at("count").get<int64_t>() : 0;
}

TEST(Stage3Hpz, ReproducesPlainStage3OnOneHost) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  const int64_t gas = 2;
  struct Case {
    int ranks;
    int64_t hpz;
  };
  std::map<int, RunLosses> plain_of;  // plain stage 3 at N ranks
  for (const Case c : {Case{2, 2}, Case{3, 3}, Case{4, 4}, Case{4, 2}}) {
    const std::string n = std::to_string(c.ranks);
    const int64_t micro = kGlobalBatch / (c.ranks * gas);
    if (!plain_of.count(c.ranks)) {
      plain_of[c.ranks] =
          train_and_read_losses(dir, data, c.ranks, micro, gas, "plain_" + n, stage3(1), kSteps);
    }
    const RunLosses& plain = plain_of[c.ranks];
    const std::string name = "hpz_" + n + "_" + std::to_string(c.hpz);
    const auto hpz =
        train_and_read_losses(dir, data, c.ranks, micro, gas, name, stage3(c.hpz), kSteps);
    expect_losses_within_1e6(
        hpz, plain,
        "N=" + n + ", zero_hpz_partition_size " + std::to_string(c.hpz) + " vs plain stage 3");
    // Each step: a block's first gather (micro-batch 1's forward) reads the primary slices (each
    // rank hands in 1/N of the block); its other 2 * gas - 1 gathers read the secondary partition
    // over the hpZ group (1/h of the block each).
    const int64_t padded = (kTinyBlock + c.ranks - 1) / c.ranks * c.ranks;
    const int64_t slice_bytes = 4 * padded / c.ranks, part_bytes = 4 * padded / c.hpz;
    if (c.hpz < c.ranks) {
      EXPECT_EQ(all_gathers_of(dir, name, part_bytes), kSteps * kBlocks * (2 * gas - 1))
          << hpz.output;
      EXPECT_EQ(all_gathers_of(dir, name, slice_bytes), kSteps * kBlocks) << hpz.output;
    } else {  // the secondary partition is the slice itself
      EXPECT_EQ(all_gathers_of(dir, name, slice_bytes), kSteps * kBlocks * 2 * gas) << hpz.output;
    }
  }
}

TEST(Stage3Hpz, APartitionSizeThatDoesNotDivideTheRanksIsRefused) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  const std::string config = dir.file("bad.json");
  write_file(config, tiny_run_config(data, dir.file("run_bad"), 2, 1, 2, stage3(3)));
  const auto r = run_ranks(4, deepshard_exe(), {"train", "--config", config}, 120);
  EXPECT_NE(r.exit_status, 0) << r.output;
  EXPECT_NE(r.output.find("zero_optimization.zero_hpz_partition_size 3 must divide the number of "
                          "data-parallel ranks (4)"),
            std::string::npos)
      << r.output;
}

std::vector<double> losses(const std::string& run_dir) {
  std::vector<double> out;
  for (const auto& m : read_metrics(run_dir)) out.push_back(m.at("loss").get<double>());
  return out;
}

// Trains `steps` steps at `ranks` with `extra`, checkpointing into `ckpt` every `save` steps
// (0: never) and resuming from `resume` ("" or "auto" or a step folder).
RunLosses train_ckpt(const TempDir& dir, const std::string& data, const std::string& name,
                     int ranks, int64_t micro, int64_t gas, int64_t steps, const std::string& ckpt,
                     int64_t save, const std::string& resume, const std::string& extra) {
  nlohmann::json j = nlohmann::json::parse(extra);
  j["train"] = {{"checkpoint_dir", ckpt}, {"save_interval", save}, {"resume", resume}};
  const std::string run_dir = dir.file("run_" + name);
  const std::string config = dir.file(name + ".json");
  write_file(config, tiny_run_config(data, run_dir, micro, gas, steps, j.dump()));
  const auto r = run_ranks(ranks, deepshard_exe(), {"train", "--config", config}, 300);
  RunLosses out;
  out.output = r.output;
  EXPECT_EQ(r.exit_status, 0) << r.output;
  if (r.exit_status == 0) out.losses = losses(run_dir);
  return out;
}

TEST(Stage3Hpz, CheckpointsResumeExactlyAndReshard) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  const std::string ckpt = dir.file("ckpt");
  // Global batch 12: N=4 micro 1 x accumulation 3, N=3 2 x 2, N=2 2 x 3.
  const auto full = train_ckpt(dir, data, "full", 4, 1, 3, kSteps, "", 0, "", stage3(2));
  const auto first = train_ckpt(dir, data, "first", 4, 1, 3, 10, ckpt, 10, "", stage3(2));
  const auto second = train_ckpt(dir, data, "second", 4, 1, 3, kSteps, ckpt, 0, "auto", stage3(2));
  ASSERT_EQ(full.losses.size(), size_t(kSteps)) << full.output;
  ASSERT_EQ(second.losses.size(), 10u) << second.output;
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(second.losses[i], full.losses[10 + i]) << "step " << 11 + i << " after the resume";
  }
  std::printf("N=4, hpZ 2: steps 11-20 after the resume equal the uninterrupted run bit for bit\n");

  // The step-10 checkpoint at other world sizes, with hpZ over all of their ranks and without.
  const auto three =
      train_ckpt(dir, data, "three", 3, 2, 2, kSteps, ckpt, 0, ckpt + "/step10", stage3(3));
  const auto two =
      train_ckpt(dir, data, "two", 2, 2, 3, kSteps, ckpt, 0, ckpt + "/step10", stage3(1));
  for (const auto* resumed : {&three, &two}) {
    ASSERT_EQ(resumed->losses.size(), 10u) << resumed->output;
    RunLosses run = first;
    run.losses.insert(run.losses.end(), resumed->losses.begin(), resumed->losses.end());
    expect_same_losses(run, full,
                       resumed == &three ? "N=4 hpZ 2 -> N=3 hpZ 3" : "N=4 hpZ 2 -> N=2 no hpZ");
  }
}

}  // namespace stage3_hpz_test
}  // namespace deepshard::testing
