// Per-collective counters: calls, bytes this rank sent into the collective, seconds from start to
// completion, and seconds the calling thread spent blocked in wait() (what overlap did not hide).
// Thread-safe (collectives complete on Gloo's threads).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace deepshard::comm {

struct CommStats {
  int64_t calls = 0;
  int64_t bytes = 0;  // payload bytes handed to the collective by this rank
  double seconds = 0.0;
  double wait_seconds =
      0.0;  // time the caller was blocked waiting for it (<= seconds + post-processing)
};

// One collective at one message size, for DeepSpeed's comms logger: how many, their bytes, and
// every latency (start to completion, seconds).
struct CommSizeStats {
  int64_t count = 0;
  int64_t bytes = 0;
  std::vector<double> latencies;
};
using CommDetail = std::map<std::string, std::map<int64_t, CommSizeStats>>;  // op -> size -> stats

// Where a collective's bytes went: between ranks of one host (shared memory or loopback), or
// across hosts (the network). A collective of a group on one host is intra-node; of a flat group
// spanning hosts, cross-node; a hierarchical collective (docs/comm.md) records each of its stages
// under its own class.
enum class LinkClass { kIntraNode, kCrossNode };
const char* to_string(LinkClass link);  // "intra_node" | "cross_node"

class CommLog {
 public:
  void record(const std::string& op, int64_t bytes, double seconds, double wait_seconds);
  // Per link class: calls, payload bytes, seconds and seconds waited (for a hierarchical
  // collective's stage, which runs on the transport's thread, both are the stage's duration).
  void record_link(LinkClass link, int64_t bytes, double seconds, double wait_seconds);
  std::map<LinkClass, CommStats> links() const;
  // Cross-node exchanges: for each peer (by its rank in the job), the seconds its data arrived
  // after the first peer's, summed over collectives. The peer behind the slowest link collects
  // the most: it is the rank the others wait for.
  void record_peer_lag(int job_rank, double seconds);
  std::map<int, double> peer_lags() const;
  std::map<std::string, CommStats> snapshot() const;  // op name -> stats
  CommStats total() const;
  void reset();

  // Off by default (it keeps every latency): per op and message size, from now on.
  void keep_detail(bool on);
  CommDetail detail() const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, CommStats> stats_;
  std::map<LinkClass, CommStats> links_;
  std::map<int, double> peer_lags_;
  bool keep_detail_ = false;
  CommDetail detail_;
};

}  // namespace deepshard::comm
