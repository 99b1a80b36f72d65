// Elapsed wall time on the monotonic clock, in seconds: the one definition the step timers,
// the profilers, the launcher's deadlines and the tests' timing share.
#pragma once

#include <chrono>

namespace deepshard::util {

using Clock = std::chrono::steady_clock;

// Seconds from t0 to now.
inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace deepshard::util
