// launch(): the local ranks of a job as child processes with torchrun's environment, one poll()
// loop that relays their output line by line, forwards SIGINT/SIGTERM, and on the first failure
// reports it and stops the rest (SIGTERM, then SIGKILL after the grace period). Ranks are started
// with PR_SET_PDEATHSIG, so even a SIGKILLed launcher leaves none behind. When the job ends, shared-
// memory segments the comm layer may have left (/dev/shm/deepshard-<port>-*, see
// src/comm/shm_segment.h: only if a rank died between creating and unlinking one) are removed.
#include "launch/launcher.h"

#include <poll.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <thread>

#include "launch/subprocess.h"
#include "platform/blas_kernels.h"
#include "deepshard/util/error.h"
#include "util/net_address.h"
#include "launch/pipe_io.h"
#include "launch/rank_output.h"
#include "launch/signal_relay.h"

namespace deepshard::launch {
namespace {

using Clock = std::chrono::steady_clock;
using Env = std::map<std::string, std::string>;

int usable_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

// design.md's traps: OpenBLAS starts one thread per core in every rank unless told otherwise, and
// libgomp's spinning fights it. Variables the user already set are left alone.
Env thread_env(int local_ranks, const LaunchEnvironment& environment) {
  const std::string threads = std::to_string(std::max(1, usable_cores() / local_ranks));
  Env env = {{"OMP_NUM_THREADS", threads},
             {"OPENBLAS_NUM_THREADS", threads},
             {"OMP_WAIT_POLICY", "PASSIVE"}};
  for (const std::string& name : environment.thread_variables_set) env.erase(name);
  return env;
}

struct RankProcess {
  int rank;
  std::unique_ptr<Subprocess> process;
  RankOutput output;
  bool pipe_open = true;
  std::optional<int> status;
};

class Job {
 public:
  Job(const LaunchOptions& options, int master_port);
  int run();

 private:
  bool running() const;
  void relay_output(RankProcess& r);
  void on_exit(RankProcess& r, int status);
  void on_signal(int sig);
  void stop_all(int sig);
  void report_failure(const RankProcess& r) const;

  const LaunchOptions& options_;
  SignalRelay signals_;  // before the ranks start, so that no signal is missed
  std::vector<RankProcess> ranks_;
  int exit_status_ = 0;
  int signalled_ = 0;                         // the signal forwarded to the ranks, if any
  std::optional<Clock::time_point> kill_at_;  // set once the ranks are being stopped
  bool killed_ = false;
};

Job::Job(const LaunchOptions& options, int master_port) : options_(options) {
  const int n = options.nproc_per_node;
  Env common = options.set_thread_env ? thread_env(n, options.environment) : Env{};
  // OpenBLAS's generic fallback core on an AVX2/AVX-512 CPU: the ranks get the matching kernels.
  const platform::BlasChoice blas = platform::current_blas_choice();
  if (!blas.coretype_to_set.empty()) {
    std::fprintf(stderr, "deepshard launch: %s\n", blas.reason.c_str());
    for (const auto& [name, value] : platform::blas_env_for_ranks(blas)) common[name] = value;
  }
  common["MASTER_ADDR"] = options.master_addr;
  common["MASTER_PORT"] = std::to_string(master_port);
  common["DEEPSHARD_JOB_TOKEN"] = job_token(options);
  common["WORLD_SIZE"] = std::to_string(n * options.nnodes);
  common["LOCAL_WORLD_SIZE"] = std::to_string(n);
  common["GROUP_RANK"] = std::to_string(options.node_rank);
  ranks_.reserve(static_cast<size_t>(n));
  for (int local = 0; local < n; ++local) {
    int rank = options.node_rank * n + local;
    SubprocessOptions sub;
    sub.argv = options.command;
    sub.extra_env = common;
    sub.extra_env["RANK"] = std::to_string(rank);
    sub.extra_env["LOCAL_RANK"] = std::to_string(local);
    ranks_.push_back({rank, std::make_unique<Subprocess>(sub), RankOutput(rank, stdout), true, {}});
  }
}

bool Job::running() const {
  return std::any_of(ranks_.begin(), ranks_.end(), [](const auto& r) { return !r.status; });
}

void Job::relay_output(RankProcess& r) {
  std::string data;
  r.pipe_open = read_some(r.process->output_fd(), data);
  r.output.feed(data);
}

void Job::on_exit(RankProcess& r, int status) {
  r.status = status;
  std::string rest;
  if (r.pipe_open) drain(r.process->output_fd(), rest);
  r.pipe_open = false;  // a grandchild may hold the pipe open: stop listening here
  r.output.feed(rest);
  r.output.finish();
  if (status != 0 && !kill_at_) {
    exit_status_ = status;
    report_failure(r);
    stop_all(SIGTERM);
  } else if (status != 0 && exit_status_ == 0) {
    // Stopping after a forwarded signal: a rank that did not exit cleanly makes the job fail as
    // the signal would have (ranks that saved and exited 0, as the trainer does on SIGTERM, don't).
    exit_status_ = signalled_ ? 128 + signalled_ : status;
  }
}

void Job::on_signal(int sig) {
  if (kill_at_) {  // a second signal: no more patience
    std::fprintf(stderr, "deepshard launch: signal %d again, killing the ranks\n", sig);
    kill_at_ = Clock::now();
    return;
  }
  std::fprintf(stderr, "deepshard launch: signal %d, forwarding it to the ranks\n", sig);
  signalled_ = sig;
  stop_all(sig);
}

void Job::stop_all(int sig) {
  kill_at_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(options_.grace_s));
  for (auto& r : ranks_) {
    if (!r.status) r.process->signal(sig);
  }
}

void Job::report_failure(const RankProcess& r) const {
  std::string text = detail::concat("deepshard launch: rank ", r.rank, " exited with status ",
                                    *r.status, "; stopping the other ranks\n");
  if (!r.output.tail().empty()) {
    text += detail::concat("deepshard launch: last ", r.output.tail().size(), " lines of rank ",
                           r.rank, ":\n");
    for (const auto& line : r.output.tail()) text += "  | " + line + "\n";
  }
  std::fputs(text.c_str(), stderr);
  std::fflush(stderr);
}

int Job::run() {
  constexpr int kPollMs = 50;
  while (running()) {
    std::vector<pollfd> fds{{signals_.fd(), POLLIN, 0}};
    std::vector<RankProcess*> listening;
    for (auto& r : ranks_) {
      if (!r.pipe_open) continue;
      fds.push_back({r.process->output_fd(), POLLIN, 0});
      listening.push_back(&r);
    }
    if (::poll(fds.data(), fds.size(), kPollMs) < 0 && errno != EINTR) {
      throw Error(detail::concat("deepshard launch: poll: ", std::strerror(errno)));
    }
    if (fds[0].revents != 0) {
      for (int sig : signals_.take()) on_signal(sig);
    }
    for (size_t i = 0; i < listening.size(); ++i) {
      if (fds[i + 1].revents != 0) relay_output(*listening[i]);
    }
    for (auto& r : ranks_) {
      if (r.status) continue;
      if (auto status = r.process->poll()) on_exit(r, *status);
    }
    if (kill_at_ && !killed_ && Clock::now() >= *kill_at_) {
      killed_ = true;
      for (auto& r : ranks_) {
        if (!r.status) r.process->signal(SIGKILL);
      }
    }
  }
  return exit_status_;
}

// The comm layer names its segments "deepshard-<port>-..."; one job per port on a host.
void remove_leftover_segments(int port) {
  const std::string prefix = "deepshard-" + std::to_string(port) + "-";
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", ec)) {
    if (entry.path().filename().string().rfind(prefix, 0) == 0) {
      std::filesystem::remove(entry.path(), ec);
    }
  }
}

// One line per node of a multi-node job: which host this is, the address the other nodes reach
// its ranks at (the one routing to the store, as the comm layer chooses it), and its ranks.
void print_node_line(const LaunchOptions& o, int port) {
  char host[256] = "?";
  ::gethostname(host, sizeof(host) - 1);
  std::string where;
  if (o.environment.socket_ifname) {
    where = detail::concat("interface ", *o.environment.socket_ifname, " (GLOO_SOCKET_IFNAME)");
  } else if (auto address = net::local_address_towards(o.master_addr, port)) {
    where = detail::concat("address ", *address);
    if (auto name = net::interface_of(*address)) where += detail::concat(" on ", *name);
  } else {
    where = detail::concat("no route to --master-addr ", o.master_addr,
                           " (the ranks will fail to join: check it, or set GLOO_SOCKET_IFNAME)");
  }
  const int first = o.node_rank * o.nproc_per_node;
  std::fprintf(stderr,
               "deepshard launch: node %d of %d, host %s, %s: ranks %d-%d of %d; store at %s:%d\n",
               o.node_rank, o.nnodes, host, where.c_str(), first, first + o.nproc_per_node - 1,
               o.nproc_per_node * o.nnodes, o.master_addr.c_str(), port);
  std::fflush(stderr);
}

}  // namespace

int launch(const LaunchOptions& options) {
  validate_launch_options(options);
  int port = options.master_port;
  if (port == 0) port = options.nnodes == 1 ? find_free_port() : 29500;
  if (options.nnodes > 1) print_node_line(options, port);
  const int status = Job(options, port).run();
  remove_leftover_segments(port);
  return status;
}

}  // namespace deepshard::launch
