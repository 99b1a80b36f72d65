// Implementation of EmulatedCluster and launch_on_cluster (see emulated_cluster.h). Every change
// to the namespaces goes through scripts/cluster.sh, the one place that knows how they are made.
#include "support/emulated_cluster.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "launch/subprocess.h"
#include "support/test_support.h"

namespace deepshard::testing {
namespace {

std::string script() { return source_dir() + "/scripts/cluster.sh"; }

// Runs cluster.sh with `args`; throws with its output when it fails.
std::string cluster_sh(const std::vector<std::string>& args, double timeout_s = 60) {
  launch::SubprocessOptions options;
  options.argv = {"bash", script()};
  options.argv.insert(options.argv.end(), args.begin(), args.end());
  launch::RunResult r = launch::run_command(options, timeout_s);
  if (r.exit_status != 0) {
    std::string command = "cluster.sh";
    for (const auto& a : args) command += " " + a;
    throw std::runtime_error(command + " failed (status " + std::to_string(r.exit_status) +
                             "): " + r.output);
  }
  return r.output;
}

// Short and unique per process and instance (interface names are at most 15 characters).
std::string unique_name() {
  static std::atomic<int> counter{0};
  const char* digits = "0123456789abcdefghijklmnopqrstuvwxyz";
  std::string pid;
  for (unsigned p = unsigned(::getpid()); p > 0; p /= 36) pid.insert(pid.begin(), digits[p % 36]);
  std::string name = "t" + pid + digits[counter++ % 36];
  return name.substr(0, 8);
}

// The reaper: blocks on a pipe until every write end is closed (the cluster's destructor, or the
// test process's death), then runs `cluster.sh down name`. In its own session, so that a signal
// to the test's process group does not take it along.
void start_reaper(const std::string& name, int& pid_out, int& fd_out) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  const std::string bash = "/bin/bash", path = script(), down = "down";
  const char* argv[] = {bash.c_str(), path.c_str(), down.c_str(), name.c_str(), nullptr};
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::setsid();
    // Only the read end stays open: another cluster's write end held here would keep that
    // cluster's reaper waiting.
    ::close_range(3, unsigned(fds[0]) - 1, 0);
    ::close_range(unsigned(fds[0]) + 1, ~0u, 0);
    char c;
    while (::read(fds[0], &c, 1) != 0) {
    }
    ::execv(argv[0], const_cast<char* const*>(argv));
    ::_exit(127);
  }
  ::close(fds[0]);
  pid_out = pid;
  fd_out = fds[1];
}

}  // namespace

std::string EmulatedCluster::unavailable() {
  if (::geteuid() != 0) return "not root (network namespaces need root)";
  if (std::system("command -v ip >/dev/null 2>&1 && command -v tc >/dev/null 2>&1 && "
                  "command -v unshare >/dev/null 2>&1") != 0) {
    return "ip, tc or unshare is not installed (iproute2, util-linux)";
  }
  const std::string probe = "dsprobe" + std::to_string(::getpid());
  const bool ok = std::system(("ip netns add " + probe + " >/dev/null 2>&1 && ip -n " + probe +
                               " link add br0 type bridge >/dev/null 2>&1")
                                  .c_str()) == 0;
  std::system(("ip netns del " + probe + " >/dev/null 2>&1").c_str());
  return ok ? "" : "`ip netns add` or a bridge inside a namespace is not allowed here";
}

EmulatedCluster::EmulatedCluster(const ClusterOptions& options)
    : name_(unique_name()), nodes_(options.nodes) {
  start_reaper(name_, reaper_pid_, reaper_fd_);
  std::vector<std::string> args = {"up", name_, std::to_string(options.nodes)};
  if (!options.rate.empty()) args.insert(args.end(), {"--rate", options.rate});
  if (!options.burst.empty()) args.insert(args.end(), {"--burst", options.burst});
  try {
    std::printf("%s", cluster_sh(args).c_str());
    subnet_ = cluster_sh({"addr", name_, "0"});
    subnet_ = subnet_.substr(0, subnet_.rfind('.'));
  } catch (...) {
    ::close(reaper_fd_);
    ::waitpid(reaper_pid_, nullptr, 0);
    throw;
  }
}

EmulatedCluster::~EmulatedCluster() {
  ::close(reaper_fd_);
  ::waitpid(reaper_pid_, nullptr, 0);
}

std::string EmulatedCluster::address(int node) const {
  return subnet_ + "." + std::to_string(node + 1);
}

std::vector<std::string> EmulatedCluster::on_node(int node,
                                                  const std::vector<std::string>& command) const {
  std::vector<std::string> argv = {"bash", script(), "exec", name_, std::to_string(node), "--"};
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

void EmulatedCluster::set_link(int node, bool up) const {
  cluster_sh({"link", name_, std::to_string(node), up ? "up" : "down"});
}

void EmulatedCluster::shape(int node, const std::string& rate, const std::string& burst) const {
  std::vector<std::string> args = {"shape", name_, std::to_string(node), rate};
  if (!burst.empty()) args.push_back(burst);
  cluster_sh(args);
}

std::vector<NodeRun> launch_on_cluster(const EmulatedCluster& cluster,
                                       const ClusterLaunch& launch) {
  std::map<std::string, std::string> env = launch.env;
  if (env.count("DEEPSHARD_JOB_TOKEN") == 0) env["DEEPSHARD_JOB_TOKEN"] = "test-" + cluster.name();
  std::vector<NodeRun> runs(size_t(cluster.nodes()));
  std::vector<std::thread> threads;
  for (int node = 0; node < cluster.nodes(); ++node) {
    std::vector<std::string> command = {deepshard_exe(),
                                        "launch",
                                        "-n",
                                        std::to_string(launch.ranks_per_node),
                                        "--nnodes",
                                        std::to_string(cluster.nodes()),
                                        "--node-rank",
                                        std::to_string(node),
                                        "--master-addr",
                                        cluster.address(0),
                                        "--master-port",
                                        std::to_string(launch.master_port),
                                        "--"};
    command.insert(command.end(), launch.command.begin(), launch.command.end());
    launch::SubprocessOptions options;
    options.argv = cluster.on_node(node, command);
    options.extra_env = env;
    threads.emplace_back([&runs, node, options, timeout = launch.timeout_s] {
      const auto start = std::chrono::steady_clock::now();
      launch::RunResult r = launch::run_command(options, timeout);
      NodeRun& run = runs[size_t(node)];
      run.exit_status = r.timed_out ? -1 : r.exit_status;
      run.output = r.output;
      run.ended = std::chrono::steady_clock::now();
      run.seconds = std::chrono::duration<double>(run.ended - start).count();
    });
  }
  for (auto& t : threads) t.join();
  return runs;
}

std::string joined_output(const std::vector<NodeRun>& runs) {
  std::string out;
  for (size_t i = 0; i < runs.size(); ++i) {
    std::istringstream lines(runs[i].output);
    for (std::string line; std::getline(lines, line);) {
      out += "[node " + std::to_string(i) + "] " + line + "\n";
    }
    out += "[node " + std::to_string(i) + "] exit status " + std::to_string(runs[i].exit_status) +
           " after " + std::to_string(runs[i].seconds) + " s\n";
  }
  return out;
}

}  // namespace deepshard::testing
