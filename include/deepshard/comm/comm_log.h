// Per-collective counters: calls, bytes this rank sent into the collective, seconds from start to
// completion, and seconds the calling thread spent blocked in wait() (what overlap did not hide).
// Thread-safe (collectives complete on Gloo's threads).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace deepshard::comm {

struct CommStats {
  int64_t calls = 0;
  int64_t bytes = 0;  // payload bytes handed to the collective by this rank
  double seconds = 0.0;
  double wait_seconds =
      0.0;  // time the caller was blocked waiting for it (<= seconds + post-processing)
};

class CommLog {
 public:
  void record(const std::string& op, int64_t bytes, double seconds, double wait_seconds);
  std::map<std::string, CommStats> snapshot() const;  // op name -> stats
  CommStats total() const;
  void reset();

 private:
  mutable std::mutex mu_;
  std::map<std::string, CommStats> stats_;
};

}  // namespace deepshard::comm
