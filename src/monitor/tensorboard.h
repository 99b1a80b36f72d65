// TensorBoard event files, as DeepSpeed's TensorBoardMonitor writes them through PyTorch's
// SummaryWriter: log_dir = output_path/job_name, file events.out.tfevents.<time>.<host>, a first
// record with file_version "brain.Event:2", then one Event per scalar (Summary.Value.simple_value,
// PyTorch's add_scalar). Records are TFRecord-framed; the protobufs come from protoc
// (src/monitor/proto/tensorboard_event.proto). Buffered: flush() makes the data visible.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "monitor/monitor.h"

namespace deepshard::monitor {

class TensorBoardMonitor : public Monitor {
 public:
  // Creates `log_dir` and a new event file in it. Throws IoError naming the path.
  explicit TensorBoardMonitor(const std::string& log_dir);
  ~TensorBoardMonitor() override;
  TensorBoardMonitor(const TensorBoardMonitor&) = delete;
  TensorBoardMonitor& operator=(const TensorBoardMonitor&) = delete;

  void write_events(const std::vector<ScalarEvent>& events) override;
  void flush() override;
  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& serialized_event);

  std::string path_;
  FILE* file_ = nullptr;
};

// One event of an event file, read back.
struct EventScalar {
  std::string tag;
  float value = 0.0f;
};
struct EventRecord {
  int64_t offset = 0;  // byte offset of its record in the file
  double wall_time = 0.0;
  int64_t step = 0;
  std::string file_version;  // set on the first record only
  std::vector<EventScalar> scalars;
};

// Reads an event file (TensorBoard's, PyTorch's or ours): checks the framing and both CRC-32Cs of
// every record and parses each Event. Throws IoError naming the file and the record's offset.
std::vector<EventRecord> read_event_file(const std::string& path);
std::vector<EventRecord> parse_event_file(const std::string& bytes, const std::string& name);

}  // namespace deepshard::monitor
