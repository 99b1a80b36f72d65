// run_command: a Subprocess run to completion with its merged output collected, killed after a
// timeout (SIGTERM to its process group, SIGKILL 2 s later) and then reported as status 124.
#include <algorithm>
#include <chrono>
#include <csignal>

#include "launch/pipe_io.h"
#include "launch/subprocess.h"

namespace deepshard::launch {

RunResult run_command(const SubprocessOptions& options, double timeout_s) {
  using Clock = std::chrono::steady_clock;
  constexpr double kKillGraceS = 2.0;
  auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  RunResult result;
  Subprocess child(options);
  bool open = true;  // the pipe has not reached EOF
  while (!child.poll()) {
    double left_s = std::chrono::duration<double>(deadline - Clock::now()).count();
    if (left_s <= 0) {
      result.timed_out = true;
      break;
    }
    if (!open) {
      child.wait(left_s);
    } else if (wait_readable(child.output_fd(), static_cast<int>(std::min(left_s, 0.1) * 1000))) {
      open = read_some(child.output_fd(), result.output);
    }
  }
  if (result.timed_out) {
    child.signal(SIGTERM);
    if (!child.wait(kKillGraceS)) {
      child.signal(SIGKILL);
      child.wait();
    }
  }
  if (open) drain(child.output_fd(), result.output);
  result.exit_status = result.timed_out ? 124 : *child.poll();
  return result;
}

}  // namespace deepshard::launch
