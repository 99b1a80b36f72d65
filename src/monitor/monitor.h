// A monitor in DeepSpeed's sense (deepspeed/monitor/monitor.py): a sink for scalar events
// (tag, value, step), written by rank 0. TensorBoard and CSV implement it; the trainer hands every
// sink the same events.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace deepshard::monitor {

struct ScalarEvent {
  std::string tag;  // e.g. "Train/Samples/train_loss"
  double value = 0.0;
  int64_t step = 0;  // DeepSpeed logs against global samples
};

class Monitor {
 public:
  virtual ~Monitor() = default;
  virtual void write_events(const std::vector<ScalarEvent>& events) = 0;
  virtual void flush() = 0;
};

}  // namespace deepshard::monitor
