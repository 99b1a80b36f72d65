// run_trial (trial_runner.h): the launcher as a child process, a poll loop that writes its output
// to stdout.log and samples its ranks' resident memory, and the measurements read back.
#include "autotune/trial_runner.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "autotune/process_tree_memory.h"
#include "deepshard/util/error.h"
#include "launch/launcher.h"
#include "launch/subprocess.h"
#include "util/stopwatch.h"

namespace deepshard::autotune {
namespace {

using Clock = std::chrono::steady_clock;

std::string human_mib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.0f MiB", double(bytes) / (1 << 20));
  return text;
}

// The ranks' own report of an allocation failure (libtorch's CPU allocator, std::bad_alloc).
bool mentions_out_of_memory(const std::string& output) {
  for (const char* marker :
       {"std::bad_alloc", "can't allocate memory", "out of memory", "Cannot allocate memory"}) {
    if (output.find(marker) != std::string::npos) return true;
  }
  return false;
}

// The last output line naming an error (the launcher's report quotes the failing rank's lines).
std::string last_error_line(const std::string& output) {
  std::istringstream lines(output);
  std::string line, found;
  while (std::getline(lines, line)) {
    if (line.find("error") != std::string::npos || line.find("Error") != std::string::npos)
      found = line;
  }
  if (found.size() > 300) found = found.substr(0, 300) + "...";
  return found;
}

void remove_shm_segments(int port) {
  const std::string prefix = "deepshard-" + std::to_string(port) + "-";
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", ec)) {
    if (entry.path().filename().string().rfind(prefix, 0) == 0)
      std::filesystem::remove(entry.path(), ec);
  }
}

}  // namespace

ExperimentResult run_trial(const TrialSpec& spec) {
  namespace fs = std::filesystem;
  fs::create_directories(spec.result_dir);
  const int port = launch::find_free_port();
  launch::SubprocessOptions sub;
  sub.argv = {spec.deepshard_exe,   "launch",  "-n", std::to_string(spec.ranks), "--master-port",
              std::to_string(port), "--grace", "5"};
  if (!spec.set_thread_env) sub.argv.push_back("--no-thread-env");
  sub.argv.push_back("--");
  sub.argv.insert(sub.argv.end(), spec.command.begin(), spec.command.end());

  std::ofstream log(spec.result_dir + "/stdout.log", std::ios::trunc);
  std::string output;
  ExperimentResult result;
  const auto t0 = Clock::now();
  launch::Subprocess launcher(sub);
  std::vector<pid_t> ranks;
  auto last_scan = t0 - std::chrono::seconds(10);
  int64_t peak = 0;
  bool over_limit = false, timed_out = false, stopping = false;
  Clock::time_point stop_at{};
  std::optional<int> status;
  bool pipe_open = true;
  while (!(status = launcher.poll())) {
    if (pipe_open) {
      pollfd fd{launcher.output_fd(), POLLIN, 0};
      if (::poll(&fd, 1, 50) > 0) {
        char buffer[65536];
        const ssize_t n = ::read(launcher.output_fd(), buffer, sizeof buffer);
        if (n > 0) {
          output.append(buffer, static_cast<size_t>(n));
          log.write(buffer, n);
          log.flush();
        } else {
          pipe_open = false;
        }
      }
    } else {
      ::usleep(50'000);
    }
    // The ranks are the launcher's children; they are looked up again once a second.
    if (util::seconds_since(last_scan) >= 1.0) {
      ranks = process_tree(launcher.pid());
      ranks.erase(std::remove(ranks.begin(), ranks.end(), launcher.pid()), ranks.end());
      last_scan = Clock::now();
    }
    for (pid_t pid : ranks) peak = std::max(peak, resident_bytes(pid));
    if (stopping) {
      if (Clock::now() >= stop_at) launcher.signal(SIGKILL);  // the launcher's group
      continue;
    }
    if (spec.memory_limit > 0 && peak > spec.memory_limit) {
      over_limit = true;
    } else if (util::seconds_since(t0) > spec.timeout_s) {
      timed_out = true;
    }
    if (over_limit || timed_out) {
      // Each rank is killed at once (PR_SET_PDEATHSIG would also take them if the launcher died);
      // the launcher then sees the failure, stops the others and exits.
      for (pid_t pid : ranks) ::kill(pid, SIGKILL);
      stopping = true;
      stop_at = Clock::now() + std::chrono::seconds(30);
    }
  }
  if (pipe_open) {
    char buffer[65536];
    pollfd fd{launcher.output_fd(), POLLIN, 0};
    while (::poll(&fd, 1, 0) > 0) {
      const ssize_t n = ::read(launcher.output_fd(), buffer, sizeof buffer);
      if (n <= 0) break;
      output.append(buffer, static_cast<size_t>(n));
      log.write(buffer, n);
    }
  }
  remove_shm_segments(port);
  result.wall_s = util::seconds_since(t0);
  result.peak_rss = peak;
  if (over_limit) {
    result.status = TrialStatus::kOutOfMemory;
    result.reason = "a rank's resident memory reached " + human_mib(peak) + " > the limit " +
                    human_mib(spec.memory_limit) + "; the ranks were stopped";
    return result;
  }
  if (timed_out) {
    result.status = TrialStatus::kFailed;
    result.reason = "no result within " + std::to_string(int(spec.timeout_s)) + " s; stopped";
    return result;
  }
  if (*status != 0) {
    result.status =
        mentions_out_of_memory(output) ? TrialStatus::kOutOfMemory : TrialStatus::kFailed;
    const std::string line = last_error_line(output);
    result.reason = "exit status " + std::to_string(*status) + (line.empty() ? "" : ": " + line);
    return result;
  }
  try {
    ExperimentResult measured =
        read_trial_metrics(spec.result_dir + "/run", spec.start_step, spec.end_step);
    measured.wall_s = result.wall_s;
    measured.peak_rss = std::max(measured.peak_rss, peak);
    return measured;
  } catch (const std::exception& e) {
    result.status = TrialStatus::kFailed;
    result.reason = e.what();
    return result;
  }
}

ExperimentResult read_trial_metrics(const std::string& run_dir, int64_t start_step,
                                    int64_t end_step) {
  std::ifstream metrics(run_dir + "/metrics.jsonl");
  DS_CHECK(metrics.good(), Error, run_dir, "/metrics.jsonl: missing (the run wrote no steps)");
  double time = 0, wait = 0, bytes = 0;
  int64_t steps = 0;
  for (std::string line; std::getline(metrics, line);) {
    if (line.empty()) continue;
    const auto record = nlohmann::json::parse(line);
    const int64_t step = record.at("step").get<int64_t>();
    if (step < start_step || step > end_step) continue;
    time += record.at("step_time_s").get<double>();
    wait += record.value("comm_wait_s", 0.0);
    bytes += record.value("comm_bytes", 0.0);
    ++steps;
  }
  DS_CHECK(steps == end_step - start_step + 1, Error, run_dir, "/metrics.jsonl: ", steps,
           " of the measured steps ", start_step, "-", end_step, " were recorded");
  std::ifstream summary_file(run_dir + "/summary.json");
  DS_CHECK(summary_file.good(), Error, run_dir, "/summary.json: missing");
  const auto summary = nlohmann::json::parse(summary_file);
  const auto& config = summary.at("config");
  const double train_batch = config.at("train_batch_size").get<double>();
  const double seq = config.at("model").at("block_size").get<double>();
  const double world = summary.at("world_size").get<double>();
  ExperimentResult r;
  r.status = TrialStatus::kRan;
  const double step_s = time / double(steps);
  r.latency_ms = 1e3 * step_s;
  r.throughput = train_batch / step_s;
  r.flops = summary.value("flops_per_token", 0.0) * train_batch * seq / world / step_s;
  r.comm_wait_s = wait / double(steps);
  r.compute_s = step_s - r.comm_wait_s;
  r.comm_bytes = bytes / double(steps);
  for (const auto& rss : summary.at("peak_rss_bytes"))
    r.peak_rss = std::max(r.peak_rss, rss.get<int64_t>());
  return r;
}

}  // namespace deepshard::autotune
