// Implementation of CommLog: maps of per-op (and per-op-and-size) counters behind one mutex.
#include "deepshard/comm/comm_log.h"

namespace deepshard::comm {

void CommLog::record(const std::string& op, int64_t bytes, double seconds, double wait_seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  CommStats& s = stats_[op];
  s.calls += 1;
  s.bytes += bytes;
  s.seconds += seconds;
  s.wait_seconds += wait_seconds;
  if (keep_detail_) {
    CommSizeStats& d = detail_[op][bytes];
    d.count += 1;
    d.bytes += bytes;
    d.latencies.push_back(seconds);
  }
}

void CommLog::keep_detail(bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  keep_detail_ = on;
}

CommDetail CommLog::detail() const {
  std::lock_guard<std::mutex> lock(mu_);
  return detail_;
}

std::map<std::string, CommStats> CommLog::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

CommStats CommLog::total() const {
  std::lock_guard<std::mutex> lock(mu_);
  CommStats sum;
  for (const auto& [op, s] : stats_) {
    sum.calls += s.calls;
    sum.bytes += s.bytes;
    sum.seconds += s.seconds;
    sum.wait_seconds += s.wait_seconds;
  }
  return sum;
}

void CommLog::reset() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.clear();
  detail_.clear();
}

}  // namespace deepshard::comm
