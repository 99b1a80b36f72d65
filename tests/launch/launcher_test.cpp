// `deepshard launch` as users run it: argument parsing, the ranks' environment, rank-prefixed whole
// lines, exit statuses, stopping every rank when one fails, signal forwarding, and no rank left
// behind when the launcher itself is killed. Ranks are small shell scripts.
#include "launch/launcher.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "deepshard/util/error.h"
#include "launch/subprocess.h"
#include "support/test_support.h"
#include "util/stopwatch.h"

namespace deepshard::launch {
namespace launcher_test {

using testing::run_deepshard;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Running and not a zombie (an orphan may wait a moment to be reaped by init).
bool alive(pid_t pid) {
  if (::kill(pid, 0) != 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string pid_field, name, state;
  stat >> pid_field >> name >> state;
  return state != "Z";
}

// Reads `p`'s output until `text` has appeared `count` times or `timeout_s` passed.
// `deepshard launch -n N -- sh -c SCRIPT`, started in the background.
SubprocessOptions launch_shell(int ranks, const std::string& script) {
  SubprocessOptions o;
  o.argv = {
      testing::deepshard_exe(), "launch", "-n", std::to_string(ranks), "--", "sh", "-c", script};
  return o;
}

std::string read_until(Subprocess& p, const std::string& text, int count, double timeout_s) {
  std::string out;
  auto start = std::chrono::steady_clock::now();
  auto occurrences = [&] {
    int n = 0;
    for (size_t pos = out.find(text); pos != std::string::npos; pos = out.find(text, pos + 1)) ++n;
    return n;
  };
  char buf[4096];
  while (occurrences() < count && util::seconds_since(start) < timeout_s) {
    ssize_t n = ::read(p.output_fd(), buf, sizeof(buf));
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

TEST(ParseLaunchArgs, ReadsEveryOptionInBothSpellings) {
  LaunchOptions o = parse_launch_args({"-n", "4", "--nnodes=2", "--node_rank", "1", "--master-addr",
                                       "10.0.0.1", "--master_port=1234", "--grace", "2.5",
                                       "--no-thread-env", "--", "prog", "-n", "--", "x"});
  EXPECT_EQ(o.nproc_per_node, 4);
  EXPECT_EQ(o.nnodes, 2);
  EXPECT_EQ(o.node_rank, 1);
  EXPECT_EQ(o.master_addr, "10.0.0.1");
  EXPECT_EQ(o.master_port, 1234);
  EXPECT_DOUBLE_EQ(o.grace_s, 2.5);
  EXPECT_FALSE(o.set_thread_env);
  EXPECT_EQ(o.command, (std::vector<std::string>{"prog", "-n", "--", "x"}));
  EXPECT_EQ(parse_launch_args({"--nproc-per-node", "3", "--", "a"}).nproc_per_node, 3);
}

// The launcher reads its environment once, while parsing: the job token's sources in order
// (DEEPSHARD_JOB_TOKEN, then srun's job and step, then mpirun's job), the interface and the thread
// variables the user set.
TEST(ParseLaunchArgs, ReadsTheLaunchersEnvironmentOnce) {
  // The variables are restored whatever happens, so later tests' ranks do not inherit them.
  struct SavedEnvironment {
    std::map<std::string, std::optional<std::string>> saved;
    explicit SavedEnvironment(std::initializer_list<const char*> names) {
      for (const char* name : names) {
        const char* value = std::getenv(name);
        saved[name] = value ? std::optional<std::string>(value) : std::nullopt;
        ::unsetenv(name);
      }
    }
    ~SavedEnvironment() {
      for (const auto& [name, value] : saved) {
        if (value)
          ::setenv(name.c_str(), value->c_str(), 1);
        else
          ::unsetenv(name.c_str());
      }
    }
  } guard{"DEEPSHARD_JOB_TOKEN",     "SLURM_JOB_ID",       "SLURM_STEP_ID",
          "OMPI_MCA_ess_base_jobid", "GLOO_SOCKET_IFNAME", "OMP_NUM_THREADS",
          "OPENBLAS_NUM_THREADS",    "OMP_WAIT_POLICY"};
  ::setenv("SLURM_JOB_ID", "77", 1);
  ::setenv("SLURM_STEP_ID", "3", 1);
  ::setenv("OMPI_MCA_ess_base_jobid", "12", 1);
  ::setenv("GLOO_SOCKET_IFNAME", "veth0", 1);
  ::setenv("OMP_WAIT_POLICY", "ACTIVE", 1);
  ::setenv("OMP_NUM_THREADS", "", 1);  // empty counts as unset
  // 192.0.2.1 is a documentation address: only parsed, never used.
  LaunchOptions o = parse_launch_args({"--nnodes", "2", "--master-addr", "192.0.2.1", "--", "a"});
  ::setenv("SLURM_JOB_ID", "78", 1);  // read once: later changes do not reach the options
  EXPECT_EQ(job_token(o), "slurm:77.3");
  EXPECT_EQ(o.environment.socket_ifname, "veth0");
  EXPECT_EQ(o.environment.thread_variables_set, std::vector<std::string>{"OMP_WAIT_POLICY"});
  o.environment.slurm_job_id.reset();
  EXPECT_EQ(job_token(o), "openmpi:12");
  o.environment.job_token = "secret";
  EXPECT_EQ(job_token(o), "secret");
}

TEST(ParseLaunchArgs, RejectsBadUsageNamingTheOption) {
  auto message = [](const std::vector<std::string>& args) {
    try {
      parse_launch_args(args);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("no UsageError");
  };
  EXPECT_NE(message({"-n", "2", "prog"}).find("missing '--'"), std::string::npos);
  EXPECT_NE(message({"-n", "2"}).find("missing '--'"), std::string::npos);
  EXPECT_NE(message({"-n", "2", "--"}).find("no command"), std::string::npos);
  EXPECT_NE(message({"-n", "0", "--", "a"}).find("-n"), std::string::npos);
  EXPECT_NE(message({"-n", "2x", "--", "a"}).find("'2x'"), std::string::npos);
  EXPECT_NE(message({"-n", "--", "a"}).find("-n expects a value"), std::string::npos);
  EXPECT_NE(message({"--nnodes", "2", "--node-rank", "2", "--", "a"}).find("--node-rank"),
            std::string::npos);
  EXPECT_NE(message({"--master-port", "70000", "-n", "1", "--", "a"}).find("--master-port"),
            std::string::npos);
  EXPECT_NE(message({"--grace", "-1", "--", "a"}).find("--grace"), std::string::npos);
  EXPECT_NE(message({"--nnodes", "2", "--master-port", "1234", "--", "a"}).find("--master-addr"),
            std::string::npos);
  // Several nodes without --master-port: every node uses torchrun's default, 29500.
  EXPECT_EQ(message({"--nnodes", "2", "--master-addr", "10.0.0.1", "--", "a"}), "no UsageError");
  EXPECT_NE(message({"--node-rnk", "1", "--", "a"}).find("did you mean '--node-rank'"),
            std::string::npos);
  EXPECT_NE(message({"--autotuning", "search", "--", "a"}).find("--autotuning expects tune or run"),
            std::string::npos);
  EXPECT_NE(message({"--memory-budget", "8e9", "--", "a"}).find("give it with --autotuning"),
            std::string::npos);
  EXPECT_NE(message({"--autotuning", "run", "--memory-budget", "lots", "--", "a"})
                .find("--memory-budget expects a number of bytes"),
            std::string::npos);
}

// DeepSpeed's spelling --autotuning=run, and the tuner's memory budget per rank.
TEST(ParseLaunchArgs, AutotuningOptions) {
  const auto o =
      parse_launch_args({"-n", "2", "--autotuning=run", "--memory-budget", "6e9", "--", "a"});
  EXPECT_EQ(o.autotuning, "run");
  EXPECT_EQ(o.memory_budget, 6'000'000'000);
  EXPECT_TRUE(parse_launch_args({"--", "a"}).autotuning.empty());
}

TEST(FindFreePort, ReturnsAPortThatCanBeBound) {
  int port = find_free_port();
  ASSERT_GT(port, 0);
  ASSERT_LE(port, 65535);
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ::close(fd);
}

TEST(LaunchCommand, UsageErrorsExit2AndHelpExits0) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"launch", "-n", "2", "true"},
           {"launch", "-n", "0", "--", "true"},
           {"launch", "-n", "two", "--", "true"},
           {"launch", "-n", "2", "--master-port", "99999", "--", "true"},
           {"launch", "-n", "2", "--"}}) {
    auto r = run_deepshard(args, 30);
    EXPECT_EQ(r.exit_status, 2) << args[2] << " " << args[3] << "\n" << r.output;
    EXPECT_NE(r.output.find("deepshard launch --help"), std::string::npos) << r.output;
  }
  auto help = run_deepshard({"launch", "--help"}, 30);
  EXPECT_EQ(help.exit_status, 0);
  EXPECT_NE(help.output.find("usage: deepshard launch -n N"), std::string::npos);
}

TEST(LaunchCommand, SetsTorchrunEnvironmentAndPrefixesLines) {
  auto r = run_deepshard(
      {"launch", "-n", "3", "--", "sh", "-c",
       "echo \"env $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $GROUP_RANK $MASTER_ADDR "
       "$MASTER_PORT $OMP_NUM_THREADS $OPENBLAS_NUM_THREADS $OMP_WAIT_POLICY\"; printf tail"},
      60);
  ASSERT_EQ(r.exit_status, 0) << r.output;
  long cores = std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN));
  std::string threads = std::to_string(std::max(1L, cores / 3));
  std::regex env_line(
      R"(\[rank (\d)\] env (\d) 3 (\d) 3 0 127\.0\.0\.1 (\d+) (\d+) (\d+) PASSIVE)");
  std::set<std::string> ports;
  int env_lines = 0, tails = 0;
  for (const auto& line : lines_of(r.output)) {
    std::smatch m;
    if (line.rfind("[rank ", 0) == 0 && line.substr(9) == "tail") ++tails;
    if (!std::regex_match(line, m, env_line)) continue;
    ++env_lines;
    EXPECT_EQ(m[1], m[2]);  // prefix names the rank that printed
    EXPECT_EQ(m[2], m[3]);  // one node: LOCAL_RANK == RANK
    ports.insert(m[4]);
    EXPECT_EQ(m[5], threads);
    EXPECT_EQ(m[6], threads);
  }
  EXPECT_EQ(env_lines, 3) << r.output;
  EXPECT_EQ(tails, 3) << "a last line without newline is still printed whole\n" << r.output;
  ASSERT_EQ(ports.size(), 1u);
  int port = std::stoi(*ports.begin());
  EXPECT_TRUE(port > 0 && port < 65536);
}

TEST(LaunchCommand, KeepsUserThreadSettingsAndGivesMultiNodeRanks) {
  // 192.0.2.1 is a documentation address: only written into the ranks' environment, never used.
  auto r = run_deepshard({"launch", "-n", "2", "--nnodes", "3", "--node-rank", "2", "--master-port",
                          "12345", "--master-addr", "192.0.2.1", "--", "sh", "-c",
                          "echo \"env $RANK $WORLD_SIZE $GROUP_RANK $MASTER_PORT $OMP_NUM_THREADS "
                          "$OMP_WAIT_POLICY\""},
                         60,
                         {{"OMP_NUM_THREADS", "7"},
                          {"OMP_WAIT_POLICY", "ACTIVE"},
                          {"DEEPSHARD_JOB_TOKEN", "the-job-s-shared-secret"}});  // several nodes
  ASSERT_EQ(r.exit_status, 0) << r.output;
  EXPECT_NE(r.output.find("[rank 4] env 4 6 2 12345 7 ACTIVE\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[rank 5] env 5 6 2 12345 7 ACTIVE\n"), std::string::npos) << r.output;
}

TEST(LaunchCommand, LinesOfConcurrentRanksStayWhole) {
  const int kLines = 3000;
  auto r = run_deepshard(
      {"launch", "-n", "4", "--", "sh", "-c",
       "i=0; while [ $i -lt " + std::to_string(kLines) +
           " ]; do echo \"r$RANK-$i-abcdefghijklmnopqrstuvwxyz0123456789\"; i=$((i+1)); done"},
      120);
  ASSERT_EQ(r.exit_status, 0);
  std::regex line_re(R"(\[rank (\d)\] r(\d)-(\d+)-abcdefghijklmnopqrstuvwxyz0123456789)");
  std::vector<int> next(4, 0);
  for (const auto& line : lines_of(r.output)) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, line_re)) << "mangled line: " << line;
    ASSERT_EQ(m[1], m[2]);
    int rank = std::stoi(m[1]);
    EXPECT_EQ(std::stoi(m[3]), next[rank]++);  // each rank's lines in order
  }
  EXPECT_EQ(next, std::vector<int>(4, kLines));
}

TEST(LaunchCommand, AllRanksSucceedingExits0) {
  auto r = run_deepshard({"launch", "-n", "2", "--", "true"}, 30);
  EXPECT_EQ(r.exit_status, 0) << r.output;
  EXPECT_EQ(r.output, "");
}

TEST(LaunchCommand, FailingRankStopsTheOthersAndIsNamed) {
  auto start = std::chrono::steady_clock::now();
  auto r = run_deepshard(
      {"launch", "-n", "3", "--", "sh", "-c",
       "if [ $RANK = 1 ]; then echo 'rank one gives up'; sleep 0.2; exit 3; fi; exec sleep 1000"},
      60);
  EXPECT_LT(util::seconds_since(start), 30.0);
  EXPECT_EQ(r.exit_status, 3) << r.output;
  EXPECT_NE(r.output.find("deepshard launch: rank 1 exited with status 3"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("  | rank one gives up"), std::string::npos) << r.output;
}

TEST(LaunchCommand, RankIgnoringSigtermIsKilledAfterTheGrace) {
  auto start = std::chrono::steady_clock::now();
  auto r = run_deepshard({"launch", "-n", "2", "--grace", "1", "--", "sh", "-c",
                          "trap '' TERM; if [ $RANK = 0 ]; then sleep 0.2; exit 9; fi; "
                          "while :; do sleep 0.1; done"},
                         60);
  EXPECT_LT(util::seconds_since(start), 15.0);
  EXPECT_EQ(r.exit_status, 9) << r.output;
  EXPECT_NE(r.output.find("rank 0 exited with status 9"), std::string::npos) << r.output;
}

TEST(LaunchCommand, SigtermReachesEveryRank) {
  Subprocess launcher(launch_shell(2,
                                   "trap 'echo got TERM $RANK; exit 0' TERM; echo ready; "
                                   "while :; do sleep 0.05; done"));
  std::string out = read_until(launcher, "ready", 2, 30);
  ASSERT_NE(out.find("[rank 1] ready"), std::string::npos) << out;
  launcher.signal(SIGTERM);
  out += read_until(launcher, "got TERM", 2, 30);
  auto status = launcher.wait(30);
  ASSERT_TRUE(status.has_value());
  // Every rank handled the signal and exited 0 (as `deepshard train` does after saving): so does
  // the launcher (Slurm requeues a preempted job that exits cleanly).
  EXPECT_EQ(*status, 0);
  EXPECT_NE(out.find("[rank 0] got TERM 0"), std::string::npos) << out;
  EXPECT_NE(out.find("[rank 1] got TERM 1"), std::string::npos) << out;
}

TEST(LaunchCommand, SigtermWithRanksDyingOfItFailsAs128PlusTheSignal) {
  Subprocess launcher(launch_shell(2, "echo ready; while :; do sleep 0.05; done"));
  read_until(launcher, "ready", 2, 30);
  launcher.signal(SIGTERM);
  auto status = launcher.wait(30);
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(*status, 128 + SIGTERM);
}

TEST(LaunchCommand, KilledLauncherLeavesNoRankBehind) {
  testing::TempDir dir;
  Subprocess launcher(
      launch_shell(3, "echo $$ > " + dir.path() + "/pid$RANK; echo ready; exec sleep 1000"));
  std::string out = read_until(launcher, "ready", 3, 30);
  ASSERT_NE(out.find("[rank 2] ready"), std::string::npos) << out;
  std::vector<pid_t> pids;
  for (int rank = 0; rank < 3; ++rank) {
    pids.push_back(std::stoi(testing::read_file(dir.file("pid" + std::to_string(rank)))));
    EXPECT_TRUE(alive(pids.back()));
  }
  launcher.signal(SIGKILL);
  launcher.wait(10);
  auto start = std::chrono::steady_clock::now();
  for (pid_t pid : pids) {
    while (alive(pid) && util::seconds_since(start) < 10) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_FALSE(alive(pid)) << "rank process " << pid << " outlived the launcher";
  }
}

// `deepshard launch` runs in a process without libtorch (the ranks start sooner); every other
// command runs in deepshard-core beside the executable, in the same process (execv).
TEST(LaunchCommand, TheLauncherLoadsNoTensorLibraryAndOtherCommandsRunTheCore) {
  auto r = run_deepshard({"launch", "-n", "1", "--", "sh", "-c", "cat /proc/$PPID/maps"}, 60);
  ASSERT_EQ(r.exit_status, 0) << r.output;
  EXPECT_NE(r.output.find("/deepshard"), std::string::npos) << "no launcher maps:\n" << r.output;
  EXPECT_EQ(r.output.find("libtorch"), std::string::npos) << "the launcher loaded libtorch";
  auto help = run_deepshard({"--help"}, 60);
  EXPECT_EQ(help.exit_status, 0) << help.output;
  EXPECT_NE(help.output.find("doctor"), std::string::npos) << help.output;
}

TEST(LaunchCommand, AMissingCoreExecutableIsNamed) {
  testing::TempDir dir;
  const std::string front = dir.file("deepshard");
  std::filesystem::copy_file(testing::deepshard_exe(), front);
  auto r = testing::run_exe(front, {"train", "--config", "x.json"}, 60);
  EXPECT_EQ(r.exit_status, 127) << r.output;
  EXPECT_NE(r.output.find("cannot run " + dir.file("deepshard-core")), std::string::npos)
      << r.output;
}

}  // namespace launcher_test
}  // namespace deepshard::launch
