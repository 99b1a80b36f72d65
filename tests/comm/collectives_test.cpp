// Multi-rank tests: the comm worker's scenarios run as real processes under `deepshard launch` with
// 2, 3 and 4 ranks; a rank that skips a collective or dies turns into errors and a launcher exit
// naming the rank; a rendezvous nobody answers fails with CommError naming address, port, rank.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <tuple>

#include "deepshard/comm/group.h"
#include "deepshard/util/error.h"
#include "launch/launcher.h"
#include "support/test_support.h"
#include "util/stopwatch.h"

namespace deepshard::comm {
namespace collectives_test {

std::string worker() { return testing::binary_dir() + "/tests/ds_comm_worker"; }

// The scenarios every (ranks, transport) row runs.
const char* const kScenarios =
    "all_reduce+all_gather+reduce_scatter+broadcast+all_to_all+async+comm_log";

// One job per (ranks, transport, scenarios) runs the scenarios in order on one group (a launch of
// N ranks costs seconds of start-up, a scenario a fraction of that); each test then checks that
// its scenario passed on every rank. A job runs once per test process, on first use.
const launch::RunResult& scenario_job(int n, const std::string& transport,
                                      const std::string& scenarios) {
  static std::map<std::tuple<int, std::string, std::string>, launch::RunResult> jobs;
  const auto key = std::make_tuple(n, transport, scenarios);
  auto it = jobs.find(key);
  if (it == jobs.end())
    it = jobs.emplace(key, testing::run_ranks(n, worker(), {scenarios}, 300,
                                              {{"DS_TEST_TRANSPORT", transport}}))
             .first;
  return it->second;
}

// Expects "scenario `scenario` passed" from every rank of the job. A job that exits
// non-zero must name a failed scenario (whose own test then fails); one that names none fails every
// test of its row.
void expect_passed(int n, const std::string& transport, const std::string& scenarios,
                   const std::string& scenario) {
  const launch::RunResult& r = scenario_job(n, transport, scenarios);
  bool all = true;
  for (int rank = 0; rank < n; ++rank) {
    const std::string passed = "[rank " + std::to_string(rank) + "] scenario " + scenario +
                               " passed on rank " + std::to_string(rank);
    const bool found = r.output.find(passed) != std::string::npos;
    EXPECT_TRUE(found) << "'" << passed << "' missing (exit status " << r.exit_status << "):\n"
                       << r.output;
    all = all && found;
  }
  if (all && r.exit_status != 0) {
    EXPECT_NE(r.output.find(" FAILED: "), std::string::npos)
        << "the job exited with status " << r.exit_status << " naming no failed scenario:\n"
        << r.output;
  }
}

// (ranks, transport): every scenario runs on Gloo and on shared memory.
class Scenario : public ::testing::TestWithParam<std::tuple<int, const char*>> {
 protected:
  void run(const std::string& scenario) {
    const auto [n, transport] = GetParam();
    expect_passed(n, transport, kScenarios, scenario);
  }
};

TEST_P(Scenario, AllReduce) { run("all_reduce"); }
TEST_P(Scenario, AllGather) { run("all_gather"); }
TEST_P(Scenario, ReduceScatter) { run("reduce_scatter"); }
TEST_P(Scenario, Broadcast) { run("broadcast"); }
TEST_P(Scenario, AllToAll) { run("all_to_all"); }
TEST_P(Scenario, Async) { run("async"); }
TEST_P(Scenario, CommLog) { run("comm_log"); }

INSTANTIATE_TEST_SUITE_P(Ranks, Scenario,
                         ::testing::Combine(::testing::Values(2, 3, 4),
                                            ::testing::Values("gloo", "shm")),
                         [](const auto& info) {
                           return std::to_string(std::get<0>(info.param)) + "ranks_" +
                                  std::get<1>(info.param);
                         });

// The shared-memory transport's results equal Gloo's bit for bit at 2, 3 and 4 ranks (each rank
// runs both transports).
TEST(ShmTransport, MatchesGlooBitForBit) {
  for (int n : {2, 3, 4}) expect_passed(n, "shm", "shm_matches_gloo", "shm_matches_gloo");
}

class CollectiveFailures : public ::testing::TestWithParam<const char*> {};

TEST_P(CollectiveFailures, SkippedCollectiveTimesOutAndTheLauncherNamesTheRank) {
  auto start = std::chrono::steady_clock::now();
  auto r = testing::run_ranks(3, worker(), {"skip_collective"}, 120,
                              {{"DS_TEST_TIMEOUT_MS", "5000"}, {"DS_TEST_TRANSPORT", GetParam()}});
  EXPECT_LT(util::seconds_since(start), 30.0);
  EXPECT_EQ(r.exit_status, 1) << r.output;
  EXPECT_NE(r.output.find("all_reduce of 10 elements (float) failed: "), std::string::npos)
      << r.output;
  // Rank 0 or 1 reports the timeout first; the launcher names it.
  bool named =
      r.output.find("deepshard launch: rank 0 exited with status 1") != std::string::npos ||
      r.output.find("deepshard launch: rank 1 exited with status 1") != std::string::npos;
  EXPECT_TRUE(named) << r.output;
  EXPECT_NE(r.output.find("caught CommError after"), std::string::npos) << r.output;
}

TEST_P(CollectiveFailures, RankExitingDuringACollectiveStopsTheJob) {
  auto start = std::chrono::steady_clock::now();
  auto r = testing::run_ranks(3, worker(), {"exit_in_collective"}, 120,
                              {{"DS_TEST_TRANSPORT", GetParam()}});
  EXPECT_LT(util::seconds_since(start), 30.0);
  EXPECT_EQ(r.exit_status, 3) << r.output;
  EXPECT_NE(r.output.find("deepshard launch: rank 1 exited with status 3"), std::string::npos)
      << r.output;
}

INSTANTIATE_TEST_SUITE_P(Transports, CollectiveFailures, ::testing::Values("gloo", "shm"),
                         [](const auto& info) { return std::string(info.param); });

// kill -9 of a rank inside a shared-memory collective: the survivors fail on their own well within
// the 20 s timeout (they ignore the launcher's SIGTERM to show it), naming the dead rank (the job
// store tells them at once, src/comm/job_store.h); the launcher reports the kill; no segment is
// left in /dev/shm. The time is each survivor's own, from entering the collective to its error: the
// test's wall time also holds rank start-up, seconds longer under ThreadSanitizer.
TEST(ShmFailures, KilledRankFailsTheOthersAndLeavesNoSegment) {
  auto r = testing::run_ranks(3, worker(), {"killed_in_collective"}, 120,
                              {{"DS_TEST_TIMEOUT_MS", "20000"}, {"DS_TEST_TRANSPORT", "shm"}});
  const std::string caught = "caught CommError after ";
  int survivors = 0;
  for (auto at = r.output.find(caught); at != std::string::npos;
       at = r.output.find(caught, at + 1), ++survivors) {
    EXPECT_LT(std::atof(r.output.c_str() + at + caught.size()), 10.0) << r.output;
  }
  EXPECT_GE(survivors, 1) << r.output;
  EXPECT_NE(r.exit_status, 0) << r.output;
  EXPECT_NE(r.output.find("deepshard launch: rank 1 exited with status 137"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("all_reduce of 1048576 elements (float) failed: "), std::string::npos)
      << r.output;
  // Named by the job store's watch (rank 1 was lost) or, if the barrier's liveness check sees it
  // first, by its pid.
  EXPECT_TRUE(r.output.find("rank 1 was lost") != std::string::npos ||
              r.output.find("rank 1 (pid ") != std::string::npos)
      << r.output;
  auto at = r.output.find("port ");
  ASSERT_NE(at, std::string::npos) << r.output;
  const std::string prefix =
      "deepshard-" + std::to_string(std::atoi(r.output.c_str() + at + 5)) + "-";
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    EXPECT_NE(entry.path().filename().string().rfind(prefix, 0), 0u) << entry.path();
  }
}

// Joins a group that can never form (the other ranks never start) on a free port: must fail with
// a CommError naming rank, world size, address and port, within a bounded time.
void expect_rendezvous_failure(int rank, int world_size) {
  RendezvousInfo info;
  info.rank = info.local_rank = rank;
  info.world_size = info.local_world_size = world_size;
  info.master_port = launch::find_free_port();
  auto start = std::chrono::steady_clock::now();
  try {
    Group::create(info, std::chrono::milliseconds(2000));
    ADD_FAILURE() << "no CommError";
  } catch (const CommError& e) {
    std::string m = e.what();
    std::printf("after %.2f s: %s\n", util::seconds_since(start), m.c_str());
    std::string who = "rank " + std::to_string(rank) + " of " + std::to_string(world_size);
    EXPECT_NE(m.find(who), std::string::npos) << m;
    EXPECT_NE(m.find("127.0.0.1:" + std::to_string(info.master_port)), std::string::npos) << m;
    EXPECT_NE(m.find("failed while"), std::string::npos) << m;
  }
  EXPECT_LT(util::seconds_since(start), 20.0);
}

TEST(Rendezvous, NobodyAtTheStoreIsACommErrorNamingAddressPortAndRank) {
  expect_rendezvous_failure(1, 2);
}

TEST(Rendezvous, StoreHostWaitingForMissingRanksFails) { expect_rendezvous_failure(0, 3); }

}  // namespace collectives_test
}  // namespace deepshard::comm
