// A child process with its stdout and stderr captured through one pipe: the building block of the
// launcher, also used by tests to run deepshard commands. POSIX only.
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace deepshard::launch {

struct SubprocessOptions {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH when it has no '/'
  std::map<std::string, std::string>
      extra_env;                  // added to (or replacing in) the parent's environment
  std::string working_dir;        // "" = the parent's
  bool new_process_group = true;  // so signals can reach the child's children
  bool die_with_parent = true;    // PR_SET_PDEATHSIG(SIGKILL): never outlive the parent (Linux)
};

class Subprocess {
 public:
  // Starts the child; throws Error when it cannot be started (the message names argv[0]).
  explicit Subprocess(const SubprocessOptions& options);
  ~Subprocess();  // kills (SIGKILL) and reaps a child still running
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  // Read end of the merged stdout+stderr pipe (blocking, close-on-exec). Until the child exits the
  // caller must keep reading it, or a chatty child blocks on a full pipe.
  int output_fd() const { return out_fd_; }

  // Non-blocking: the exit status if the child has exited (reaped), else nullopt.
  // Exit status: the exit code, or 128 + signal number if killed by a signal.
  std::optional<int> poll();
  // Blocks until exit or `timeout_s` (< 0: forever); nullopt on timeout.
  std::optional<int> wait(double timeout_s = -1);
  void signal(int sig);  // to the child's process group when new_process_group

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  bool signal_group_ = false;  // signal() targets the child's process group
  std::optional<int> status_;
};

// Runs a command to completion, collecting its merged output. Kills it after `timeout_s` and
// then returns exit status 124 (as timeout(1) does).
struct RunResult {
  int exit_status = -1;
  std::string output;
  bool timed_out = false;
};
RunResult run_command(const SubprocessOptions& options, double timeout_s);

}  // namespace deepshard::launch
