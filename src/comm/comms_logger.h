// DeepSpeed's comms logger (deepspeed/utils/comms_logging.py) over the comm log's per-size detail:
// for each collective and message size, count, total and trimmed-mean latency, algorithm and bus
// bandwidth (nccl-tests' formulas, DeepSpeed's calc_bw_log), printed as DeepSpeed's summary table.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "deepshard/comm/comm_log.h"

namespace deepshard::comm {

struct CommsLoggerOptions {
  bool prof_all = true;               // every collective; false: only those in prof_ops
  std::vector<std::string> prof_ops;  // op names: all_reduce, all_gather, reduce_scatter, ...
};

// (algbw, busbw) in Gbps for `bytes` handed to `op` by each of `world_size` ranks in `seconds`.
// all_gather / reduce_scatter count size * world_size; all_reduce 2x (bus 2(n-1)/n).
std::pair<double, double> bandwidth_gbps(const std::string& op, int64_t bytes, double seconds,
                                         int world_size);
// DeepSpeed's convert_size: "0B", "512.0 B", "1.5 KB", "3.75 MB" (1024-based, 2 decimals).
std::string convert_size(int64_t bytes);
// The mean of the values left after trimming round(10 %) from each end (DeepSpeed's trim_mean).
double trim_mean(std::vector<double> values, double trim_fraction = 0.1);

// DeepSpeed's log_all table: a header row, then each op and one row per message size with
// Message Size, Count, Total Latency(ms), Avg Latency(ms), tput_avg (Gbps), busbw_avg (Gbps).
std::string format_comms_summary(const CommDetail& detail, int world_size,
                                 const CommsLoggerOptions& options = {});
// The detail since `before` (a per-step table).
CommDetail detail_since(const CommDetail& now, const CommDetail& before);

}  // namespace deepshard::comm
