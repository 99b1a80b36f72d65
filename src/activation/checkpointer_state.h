// Checkpointer::State: what the checkpointer shares with the regions it checkpointed (they may be
// back-propagated after the pass ended): the options, the model-parallel group, the position in
// the current pass, the contiguous buffer and the profile's times.
#pragma once

#include <mutex>
#include <vector>

#include "activation/checkpoint.h"
#include "activation/kept_input.h"

namespace deepshard::activation {

struct Checkpointer::State {
  State(const config::ActivationCheckpointingConfig& o, comm::Group* g)
      : options(o), group(g), contiguous(o.number_checkpoints.value_or(0)) {}

  config::ActivationCheckpointingConfig options;
  comm::Group* group;
  int64_t next_region = 0;  // regions seen in the current pass
  int64_t regions = 0;      // checkpointed in the current pass
  int64_t kept_bytes = 0;   // held by their kept inputs
  ContiguousBuffer contiguous;
  bool said_host = false;       // the cpu_checkpointing info line was printed
  bool warned_no_grad = false;  // a region whose inputs need no gradient ran plainly

  std::mutex mu;  // times (backward may run on another thread)
  std::vector<RegionTimes> times;
  void add_time(int64_t region, double RegionTimes::*field, double seconds) {
    std::lock_guard<std::mutex> lock(mu);
    if (int64_t(times.size()) <= region) times.resize(size_t(region + 1));
    times[size_t(region)].*field += seconds;
  }
};

}  // namespace deepshard::activation
