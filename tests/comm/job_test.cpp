// The job as a whole (src/comm/store_server.h): a rank killed with SIGKILL stops every other rank
// within seconds, naming it, whether the ranks run under `deepshard launch` or were started by
// something else (mpirun, srun: here the test starts them itself); a process presenting another
// job token is refused with an error saying so while the job goes on; the store listens on its
// address only; a port already taken is an error naming it.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <thread>

#include "deepshard/comm/group.h"
#include "deepshard/util/error.h"
#include "launch/launcher.h"
#include "launch/subprocess.h"
#include "support/test_support.h"
#include "util/stopwatch.h"

namespace deepshard::comm {
namespace job_test {

using Clock = std::chrono::steady_clock;
using testing::read_file;
using testing::read_output;

std::string worker() { return testing::binary_dir() + "/tests/ds_job_worker"; }

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

// Waits (up to 60 s) for every rank's pid file; returns the pids.
std::vector<pid_t> wait_for_pids(const testing::TempDir& dir, int n) {
  std::vector<pid_t> pids;
  const auto start = Clock::now();
  for (int r = 0; r < n; ++r) {
    const std::string f = dir.file("pid." + std::to_string(r));
    while (!exists(f) && util::seconds_since(start) < 60) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    pids.push_back(exists(f) ? pid_t(std::stol(read_file(f))) : pid_t(-1));
  }
  return pids;
}

// Ranks started directly (no launcher), each with torchrun's variables, as mpirun or srun would.
struct BareJob {
  BareJob(int n, const testing::TempDir& dir, int port,
          const std::string& scenario = "communicate_until_stopped") {
    for (int r = 0; r < n; ++r) {
      launch::SubprocessOptions o;
      o.argv = {worker(), scenario, dir.path()};
      o.extra_env = {{"RANK", std::to_string(r)},           {"WORLD_SIZE", std::to_string(n)},
                     {"MASTER_ADDR", "127.0.0.1"},          {"MASTER_PORT", std::to_string(port)},
                     {"DEEPSHARD_JOB_TOKEN", "bare-token"}, {"DS_TEST_TIMEOUT_MS", "300000"}};
      ranks.push_back(std::make_unique<launch::Subprocess>(o));
    }
  }
  // Waits for every rank (up to `timeout_s` each); the exit statuses.
  std::vector<int> wait(double timeout_s) {
    std::vector<int> statuses;
    for (auto& r : ranks) statuses.push_back(r->wait(timeout_s).value_or(-1));
    return statuses;
  }
  std::string output() {
    std::string all;
    for (auto& r : ranks) all += read_output(*r);
    return all;
  }
  std::vector<std::unique_ptr<launch::Subprocess>> ranks;
};

void expect_killed_rank_stops_bare_job(int victim,
                                       const std::string& scenario = "communicate_until_stopped") {
  testing::TempDir dir;
  BareJob job(3, dir, launch::find_free_port(), scenario);
  const auto pids = wait_for_pids(dir, 3);
  ASSERT_GT(pids[size_t(victim)], 0) << job.output();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // mid-communication
  const auto start = Clock::now();
  ASSERT_EQ(::kill(pids[size_t(victim)], SIGKILL), 0);
  const auto statuses = job.wait(60);
  const double seconds = util::seconds_since(start);
  const std::string output = job.output();
  std::printf("rank %d killed: the others stopped after %.2f s\n%s", victim, seconds,
              output.c_str());
  EXPECT_LT(seconds, 30.0);
  for (int r = 0; r < 3; ++r) {
    if (r == victim) {
      EXPECT_EQ(statuses[size_t(r)], 128 + SIGKILL);
    } else {
      EXPECT_NE(statuses[size_t(r)], 0) << "rank " << r;
      EXPECT_NE(statuses[size_t(r)], -1) << "rank " << r << " still running";
    }
  }
  EXPECT_NE(output.find("the job stops: rank " + std::to_string(victim) + " was lost"),
            std::string::npos)
      << output;
}

TEST(JobWithoutLauncher, KilledRankStopsEveryOtherRankNamingIt) {
  expect_killed_rank_stops_bare_job(1);
}

TEST(JobWithoutLauncher, KilledStoreHostStopsEveryOtherRankNamingIt) {
  expect_killed_rank_stops_bare_job(0);
}

// No collective in flight to notice: the store's watch alone stops the others (after its grace).
TEST(JobWithoutLauncher, KilledRankStopsRanksThatComputeAlone) {
  expect_killed_rank_stops_bare_job(1, "compute_alone");
}

TEST(JobUnderLauncher, KilledRankStopsTheJobNamingIt) {
  testing::TempDir dir;
  const std::string deepshard = testing::deepshard_exe();
  launch::SubprocessOptions o;
  o.argv = {deepshard, "launch", "-n", "3", "--", worker(), "communicate_until_stopped",
            dir.path()};
  o.extra_env = {{"DS_TEST_TIMEOUT_MS", "300000"}};
  launch::Subprocess launcher(o);
  const auto pids = wait_for_pids(dir, 3);
  ASSERT_GT(pids[2], 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto start = Clock::now();
  ASSERT_EQ(::kill(pids[2], SIGKILL), 0);
  const auto status = launcher.wait(60);
  const double seconds = util::seconds_since(start);
  const std::string output = read_output(launcher);
  std::printf("rank 2 killed: the launcher exited after %.2f s\n%s", seconds, output.c_str());
  ASSERT_TRUE(status.has_value());
  EXPECT_NE(*status, 0);
  EXPECT_LT(seconds, 30.0);
  EXPECT_NE(output.find("rank 2"), std::string::npos) << output;
}

TEST(JobToken, AStrangerIsRefusedAndTheJobGoesOn) {
  testing::TempDir dir;
  const int port = launch::find_free_port();
  BareJob job(2, dir, port);
  ASSERT_GT(wait_for_pids(dir, 2)[1], 0) << job.output();
  for (const char* token : {"another-token", ""}) {
    RendezvousInfo stranger;
    stranger.rank = stranger.local_rank = 1;
    stranger.world_size = stranger.local_world_size = 2;
    stranger.master_port = port;
    stranger.job_token = token;
    try {
      Group::create(stranger, std::chrono::milliseconds(5000));
      ADD_FAILURE() << "a process with token '" << token << "' joined";
    } catch (const CommError& e) {
      const std::string m = e.what();
      std::printf("stranger with token '%s': %s\n", token, m.c_str());
      EXPECT_NE(m.find("job token differs"), std::string::npos) << m;
      EXPECT_NE(m.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << m;
    }
  }
  testing::write_file(dir.file("stop"), "");
  const auto statuses = job.wait(60);
  const std::string output = job.output();
  EXPECT_EQ(statuses, (std::vector<int>{0, 0})) << output;
  EXPECT_NE(output.find("scenario communicate_until_stopped passed on rank 1"), std::string::npos)
      << output;
}

TEST(JobToken, TheLauncherGivesEachJobItsOwnToken) {
  auto a = testing::run_deepshard(
      {"launch", "-n", "1", "--", "sh", "-c", "echo token=$DEEPSHARD_JOB_TOKEN"});
  auto b = testing::run_deepshard(
      {"launch", "-n", "1", "--", "sh", "-c", "echo token=$DEEPSHARD_JOB_TOKEN"});
  ASSERT_EQ(a.exit_status, 0) << a.output;
  const auto token = [](const std::string& out) {
    const size_t at = out.find("token=");
    return at == std::string::npos ? std::string() : out.substr(at + 6, 32);
  };
  EXPECT_EQ(token(a.output).size(), 32u) << a.output;
  EXPECT_NE(token(a.output), token(b.output));
  auto fixed = testing::run_deepshard(
      {"launch", "-n", "1", "--", "sh", "-c", "echo token=$DEEPSHARD_JOB_TOKEN"}, 60,
      {{"DEEPSHARD_JOB_TOKEN", "shared-secret-of-the-job-0123456"}});
  EXPECT_NE(fixed.output.find("token=shared-secret-of-the-job-0123456"), std::string::npos)
      << fixed.output;
  auto multi = testing::run_deepshard({"launch", "-n", "1", "--nnodes", "2", "--master-addr",
                                       "10.0.0.1", "--master-port", "29999", "--", "true"},
                                      60, {{"DEEPSHARD_JOB_TOKEN", ""}});
  EXPECT_NE(multi.exit_status, 0);
  EXPECT_NE(multi.output.find("DEEPSHARD_JOB_TOKEN"), std::string::npos) << multi.output;
}

// Connects to 127.0.0.2:port (another loopback address than the store's).
bool reachable_on_other_address(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  ::inet_pton(AF_INET, "127.0.0.2", &a.sin_addr);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  ::close(fd);
  return ok;
}

TEST(JobStore, ListensOnTheMasterAddressOnly) {
  testing::TempDir dir;
  const int port = launch::find_free_port();
  BareJob job(2, dir, port);
  ASSERT_GT(wait_for_pids(dir, 2)[1], 0) << job.output();
  EXPECT_FALSE(reachable_on_other_address(port));
  testing::write_file(dir.file("stop"), "");
  EXPECT_EQ(job.wait(60), (std::vector<int>{0, 0})) << job.output();
}

TEST(JobStore, APortAlreadyTakenIsAnErrorNamingIt) {
  const int port = launch::find_free_port();
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  RendezvousInfo info;
  info.world_size = info.local_world_size = 2;
  info.master_port = port;
  const auto start = Clock::now();
  try {
    Group::create(info, std::chrono::milliseconds(5000));
    ADD_FAILURE() << "rank 0 hosted a store on a taken port";
  } catch (const CommError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << m;
    EXPECT_NE(m.find("the port is taken"), std::string::npos) << m;
  }
  EXPECT_LT(util::seconds_since(start), 2.0);
  ::close(fd);
}

}  // namespace job_test
}  // namespace deepshard::comm
