// Implementation of CommLog: maps of per-op, per-op-and-size and per-link-class counters behind one
// mutex.
#include "deepshard/comm/comm_log.h"

namespace deepshard::comm {

namespace {

void add(CommStats& s, int64_t bytes, double seconds, double wait_seconds) {
  s.calls += 1;
  s.bytes += bytes;
  s.seconds += seconds;
  s.wait_seconds += wait_seconds;
}

}  // namespace

void CommLog::record(const std::string& op, int64_t bytes, double seconds, double wait_seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  add(stats_[op], bytes, seconds, wait_seconds);
  if (keep_detail_) {
    CommSizeStats& d = detail_[op][bytes];
    d.count += 1;
    d.bytes += bytes;
    d.latencies.push_back(seconds);
  }
}

void CommLog::record_link(LinkClass link, int64_t bytes, double seconds, double wait_seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  add(links_[link], bytes, seconds, wait_seconds);
}

std::map<LinkClass, CommStats> CommLog::links() const {
  std::lock_guard<std::mutex> lock(mu_);
  return links_;
}

void CommLog::record_peer_lag(int job_rank, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  peer_lags_[job_rank] += seconds;
}

std::map<int, double> CommLog::peer_lags() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peer_lags_;
}

const char* to_string(LinkClass link) {
  return link == LinkClass::kIntraNode ? "intra_node" : "cross_node";
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
  links_.clear();
  peer_lags_.clear();
  detail_.clear();
}

}  // namespace deepshard::comm
