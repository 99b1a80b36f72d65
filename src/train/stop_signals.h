// SIGTERM/SIGINT during a checkpointing run (as Slurm preempts): the handler only records the
// signal; the step loop asks stop_requested() after each step, saves and exits 0.
#pragma once

#include <csignal>

namespace deepshard::train {

// Installs the handlers for its lifetime when `active` (restores the previous ones after).
class StopSignals {
 public:
  explicit StopSignals(bool active);
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  bool active_;
  struct sigaction old_term_ {
  }, old_int_{};
};

// Whether SIGTERM or SIGINT came since the active StopSignals was installed.
bool stop_requested();

}  // namespace deepshard::train
