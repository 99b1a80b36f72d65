// Implementation of stop_signals.h.
#include "train/stop_signals.h"

#include <atomic>

namespace deepshard::train {
namespace {

// The signal that asked the run to stop, set by the handler: the one thing a signal handler may
// touch.
std::atomic<int> g_stop_signal{0};
extern "C" void on_stop_signal(int sig) { g_stop_signal.store(sig); }

}  // namespace

StopSignals::StopSignals(bool active) : active_(active) {
  if (!active_) return;
  g_stop_signal.store(0);
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sa.sa_flags = SA_RESTART;  // collectives blocked in a syscall carry on
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, &old_term_);
  ::sigaction(SIGINT, &sa, &old_int_);
}

StopSignals::~StopSignals() {
  if (!active_) return;
  ::sigaction(SIGTERM, &old_term_, nullptr);
  ::sigaction(SIGINT, &old_int_, nullptr);
}

bool stop_requested() { return g_stop_signal.load() != 0; }

}  // namespace deepshard::train
