// Nothing lost when a rank dies: at each ZeRO stage, 2 ranks of `deepshard train` started without
// the launcher (as mpirun/srun would: the test starts them itself and knows their pids) save every
// 3 steps; once the run has reached a seeded step, one seeded rank is killed with SIGKILL after a
// seeded delay (so the kill lands in forward, backward, a collective, the optimizer step or a
// checkpoint write, wherever the run is). The other rank must stop within 30 s, non-zero, naming
// the lost rank; then `train.resume: auto` under the launcher continues from the latest complete
// checkpoint and its losses equal the uninterrupted run's bit for bit from there on.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <random>
#include <thread>

#include "launch/launcher.h"
#include "launch/subprocess.h"
#include "train/run_helpers.h"
#include "util/stopwatch.h"

namespace deepshard::testing {
namespace rank_kill_resume_test {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int64_t kSteps = 30;

std::string stage_extra(int stage, const std::string& ckpt, int64_t save_interval,
                        const std::string& resume) {
  nlohmann::json j = {{"zero_optimization", {{"stage", stage}}},
                      {"train",
                       {{"checkpoint_dir", ckpt},
                        {"save_interval", save_interval},
                        {"resume", resume},
                        {"log_interval", 1}}}};
  return j.dump();
}

size_t metric_lines(const std::string& run_dir) {
  if (!fs::exists(run_dir + "/metrics.jsonl")) return 0;
  return read_metrics(run_dir).size();
}

void kill_and_resume(int stage, uint64_t seed) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  std::mt19937_64 rng(seed);
  const size_t kill_after_step = 4 + rng() % 6;  // 4..9
  const int victim = int(rng() % 2);
  const int delay_ms = int(rng() % 100);

  // The uninterrupted run.
  const std::string full_config = dir.file("full.json");
  write_file(full_config,
             tiny_run_config(data, dir.file("full"), 2, 2, kSteps, stage_extra(stage, "", 0, "")));
  auto full = run_ranks(2, deepshard_exe(), {"train", "--config", full_config});
  ASSERT_EQ(full.exit_status, 0) << full.output;
  const auto reference = read_metrics(dir.file("full"));
  ASSERT_EQ(reference.size(), size_t(kSteps));

  // The run that loses a rank: ranks started directly, no launcher.
  const std::string ckpt = dir.file("ckpt");
  const std::string config = dir.file("faulty.json");
  write_file(config, tiny_run_config(data, dir.file("faulty"), 2, 2, kSteps,
                                     stage_extra(stage, ckpt, 3, "auto")));
  const int port = launch::find_free_port();
  std::vector<std::unique_ptr<launch::Subprocess>> ranks;
  for (int r = 0; r < 2; ++r) {
    launch::SubprocessOptions o;
    o.argv = {deepshard_exe(), "train", "--config", config};
    o.extra_env = {{"RANK", std::to_string(r)},     {"WORLD_SIZE", "2"},
                   {"MASTER_ADDR", "127.0.0.1"},    {"MASTER_PORT", std::to_string(port)},
                   {"DEEPSHARD_JOB_TOKEN", "kill"}, {"OMP_NUM_THREADS", "1"},
                   {"OPENBLAS_NUM_THREADS", "1"}};
    ranks.push_back(std::make_unique<launch::Subprocess>(o));
  }
  const auto started = Clock::now();
  while (metric_lines(dir.file("faulty")) < kill_after_step &&
         Clock::now() - started < std::chrono::seconds(120) && !ranks[0]->poll()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
  const auto killed_at = Clock::now();
  ranks[size_t(victim)]->signal(SIGKILL);
  std::string output;
  std::vector<int> statuses;
  for (auto& r : ranks) {
    statuses.push_back(r->wait(60).value_or(-1));
    output += read_output(*r);
  }
  const double stop_s = util::seconds_since(killed_at);
  const int survivor = 1 - victim;
  EXPECT_NE(statuses[size_t(survivor)], 0) << output;
  EXPECT_NE(statuses[size_t(survivor)], -1) << "the surviving rank did not stop\n" << output;
  EXPECT_LT(stop_s, 30.0) << output;
  EXPECT_NE(output.find("rank " + std::to_string(victim) + " was lost"), std::string::npos)
      << output;
  const size_t done_before_kill = metric_lines(dir.file("faulty"));

  // Resume: the latest complete checkpoint, then the same losses as the uninterrupted run.
  write_file(config, tiny_run_config(data, dir.file("resumed"), 2, 2, kSteps,
                                     stage_extra(stage, ckpt, 3, "auto")));
  auto resumed = run_ranks(2, deepshard_exe(), {"train", "--config", config});
  ASSERT_EQ(resumed.exit_status, 0) << resumed.output;
  const auto after = read_metrics(dir.file("resumed"));
  ASSERT_FALSE(after.empty());
  const int64_t first = after.front().at("step").get<int64_t>();
  EXPECT_EQ(after.back().at("step").get<int64_t>(), kSteps);
  EXPECT_EQ((first - 1) % 3, 0) << "resumed after step " << first - 1;
  for (const auto& m : after) {
    const auto step = m.at("step").get<int64_t>();
    EXPECT_EQ(m.at("loss").get<double>(), reference[size_t(step - 1)].at("loss").get<double>())
        << "stage " << stage << ", step " << step;
  }
  std::printf(
      "stage %d, seed %llu: rank %d killed %d ms after step %zu (%zu steps logged); the "
      "other stopped in %.2f s (status %d); resumed from step %lld, steps %lld-%lld equal "
      "the uninterrupted run bit for bit\n",
      stage, static_cast<unsigned long long>(seed), victim, delay_ms, kill_after_step,
      done_before_kill, stop_s, statuses[size_t(survivor)], static_cast<long long>(first - 1),
      static_cast<long long>(first), static_cast<long long>(kSteps));
}

TEST(RankKillResume, Stage0) { kill_and_resume(0, 1); }
TEST(RankKillResume, Stage1) { kill_and_resume(1, 2); }
TEST(RankKillResume, Stage2) { kill_and_resume(2, 3); }
TEST(RankKillResume, Stage3) { kill_and_resume(3, 4); }

}  // namespace rank_kill_resume_test
}  // namespace deepshard::testing
