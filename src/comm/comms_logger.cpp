// Implementation of comms_logger.h.
#include "comm/comms_logger.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <numeric>

namespace deepshard::comm {
namespace {

// Python's str() of a float: the shortest form that reads back, "512.0" rather than "512".
std::string python_float(double v) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, res.ptr);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string cell(const std::string& s) {  // f"{s: <20}"
  return s.size() >= 20 ? s : s + std::string(20 - s.size(), ' ');
}

std::string fixed2(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

}  // namespace

std::pair<double, double> bandwidth_gbps(const std::string& op, int64_t bytes, double seconds,
                                         int world_size) {
  if (seconds <= 0) return {0.0, 0.0};
  const double n = world_size, ms = seconds * 1e3;
  double size = static_cast<double>(bytes), algbw = 0, busbw = 0;
  if (op == "all_gather" || op == "reduce_scatter") {
    size *= n;
    algbw = size / ms;
    busbw = size / ms * ((n - 1) / n);
  } else if (op == "all_reduce") {
    algbw = size * 2 / ms;
    busbw = size / ms * (2 * (n - 1) / n);
  } else if (op == "all_to_all") {
    algbw = size / ms;
    busbw = size / ms * ((n - 1) / n);
  } else {  // broadcast, barrier, point to point
    algbw = busbw = size / ms;
  }
  return {algbw * 8 / 1e6, busbw * 8 / 1e6};  // bytes per ms -> Gbps
}

std::string convert_size(int64_t bytes) {
  if (bytes <= 0) return "0B";
  static const char* kNames[] = {"B", "KB", "MB", "GB", "TB", "PB", "EB"};
  const int i =
      std::min(6, static_cast<int>(std::floor(std::log(double(bytes)) / std::log(1024.0))));
  const double p = std::pow(1024.0, i);
  return python_float(std::round(double(bytes) / p * 100.0) / 100.0) + " " + kNames[i];
}

double trim_mean(std::vector<double> values, double trim_fraction) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  const size_t k = static_cast<size_t>(std::llround(double(n) * trim_fraction));
  if (2 * k >= n) return 0.0;
  return std::accumulate(values.begin() + k, values.end() - k, 0.0) / double(n - 2 * k);
}

std::string format_comms_summary(const CommDetail& detail, int world_size,
                                 const CommsLoggerOptions& options) {
  std::string out = cell("Comm. Op") + cell("Message Size") + cell("Count") +
                    cell("Total Latency(ms)") + cell("Avg Latency(ms)") + cell("tput_avg (Gbps)") +
                    cell("busbw_avg (Gbps)") + "\n";
  for (const auto& [op, sizes] : detail) {
    if (!options.prof_all &&
        std::find(options.prof_ops.begin(), options.prof_ops.end(), op) == options.prof_ops.end())
      continue;
    out += op + "\n";
    for (const auto& [size, s] : sizes) {
      std::vector<double> ms, algbw, busbw;
      for (double seconds : s.latencies) {
        ms.push_back(seconds * 1e3);
        const auto [a, b] = bandwidth_gbps(op, size, seconds, world_size);
        algbw.push_back(a);
        busbw.push_back(b);
      }
      const double total_ms = std::accumulate(ms.begin(), ms.end(), 0.0);
      out += cell(" ") + cell(convert_size(size)) + cell(std::to_string(s.count)) +
             cell(fixed2(total_ms)) + cell(fixed2(trim_mean(ms))) + cell(fixed2(trim_mean(algbw))) +
             cell(fixed2(trim_mean(busbw))) + "\n";
    }
  }
  return out;
}

CommDetail detail_since(const CommDetail& now, const CommDetail& before) {
  CommDetail out;
  for (const auto& [op, sizes] : now) {
    for (const auto& [size, s] : sizes) {
      CommSizeStats d = s;
      auto op_it = before.find(op);
      if (op_it != before.end()) {
        auto it = op_it->second.find(size);
        if (it != op_it->second.end()) {
          d.count -= it->second.count;
          d.bytes -= it->second.bytes;
          d.latencies.erase(d.latencies.begin(),
                            d.latencies.begin() + static_cast<long>(it->second.latencies.size()));
        }
      }
      if (d.count > 0) out[op][size] = std::move(d);
    }
  }
  return out;
}

}  // namespace deepshard::comm
