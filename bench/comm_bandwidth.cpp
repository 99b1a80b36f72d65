// Bus bandwidth of deepshard's collectives (all_reduce, all_gather, reduce_scatter; fp32 and bf16)
// for buffers of 1 MB to 128 MB. Run under the launcher:
//   deepshard launch -n 2 -- build/bench/comm_bandwidth [--min-mb 1] [--max-mb 128] [--repeat 7]
//       [--transport auto|gloo|shm]
// Size S is the full buffer (all_gather's output, reduce_scatter's input). Bus bandwidth follows
// nccl-tests: all_reduce S/t * 2(N-1)/N, all_gather and reduce_scatter S/t * (N-1)/N. Each figure
// is the median over --repeat timed runs (after one warm-up), each run bracketed by barriers and
// timed as the slowest rank's time (a max all-reduce). Rank 0 prints the table.
// --transport auto|gloo|shm picks the transport (default auto: shared memory on one host). Before
// the table, rank 0 prints the single-core memcpy bandwidth of a --max-mb buffer (median of
// --repeat, after the other ranks reached a barrier and wait in the next one), the yardstick for
// the shared-memory figures.
#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "comm/transport_options.h"
#include "deepshard/comm/group.h"
#include "util/stopwatch.h"

namespace {

using deepshard::comm::Group;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median over `repeat` runs of the slowest rank's time for `fn`.
double time_collective(Group& group, int repeat, const std::function<void()>& fn) {
  fn();  // warm-up: connections, allocations
  std::vector<double> seconds;
  at::Tensor slowest = at::zeros({1}, at::kDouble);
  for (int i = 0; i < repeat; ++i) {
    group.barrier();
    auto start = std::chrono::steady_clock::now();
    fn();
    slowest.fill_(deepshard::util::seconds_since(start));
    group.all_reduce(slowest, deepshard::comm::ReduceOp::kMax);
    seconds.push_back(slowest.item<double>());
  }
  return median(seconds);
}

std::string string_flag(int argc, char** argv, const std::string& name, std::string fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (argv[i] == name) return argv[i + 1];
  }
  return fallback;
}

// GB/s of std::memcpy between two pre-faulted buffers of `bytes`, median of `repeat`.
double memcpy_bandwidth(int64_t bytes, int repeat) {
  std::vector<char> from(bytes, 1), to(bytes, 0);
  std::vector<double> seconds;
  for (int i = 0; i < repeat + 1; ++i) {
    auto start = std::chrono::steady_clock::now();
    std::memcpy(to.data(), from.data(), bytes);
    if (i > 0) {
      seconds.push_back(deepshard::util::seconds_since(start));
    }
  }
  return bytes / median(seconds) / 1e9;
}

int int_flag(int argc, char** argv, const std::string& name, int fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (argv[i] == name) return std::atoi(argv[i + 1]);
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace deepshard::comm;
  const int max_mb = int_flag(argc, argv, "--max-mb", 128);
  const int min_mb = std::max(1, int_flag(argc, argv, "--min-mb", 1));
  const int repeat = std::max(1, int_flag(argc, argv, "--repeat", 7));
  try {
    GroupOptions options;
    options.timeout = std::chrono::minutes(5);
    options.transport =
        parse_transport(string_flag(argc, argv, "--transport", "auto"), "--transport");
    auto group = create_group(rendezvous_from_env(), options);
    const int n = group->size();
    const double ring = double(n - 1) / n;
    group->barrier();
    if (group->rank() == 0) {
      std::printf("memcpy (1 core, %d MB): %.2f GB/s\n", max_mb,
                  memcpy_bandwidth(int64_t{max_mb} << 20, repeat));
    }
    group->barrier();
    if (group->rank() == 0) {
      std::printf("ranks %d, transport %s, median of %d; bus bandwidth in GB/s (time in ms)\n", n,
                  transport_name(*group), repeat);
      std::printf("%-6s %-5s %18s %18s %18s\n", "MB", "dtype", "all_reduce", "all_gather",
                  "reduce_scatter");
    }
    for (auto dtype : {at::kFloat, at::kBFloat16}) {
      for (int mb = min_mb; mb <= max_mb; mb *= 2) {
        const int64_t bytes = int64_t{mb} << 20;
        const int64_t numel = bytes / at::elementSize(dtype) / n * n;
        at::Tensor full = at::ones({numel}, dtype);
        at::Tensor shard = at::ones({numel / n}, dtype);
        double ar = time_collective(*group, repeat, [&] { group->all_reduce(full); });
        double ag = time_collective(*group, repeat, [&] { group->all_gather(full, shard); });
        double rs = time_collective(*group, repeat, [&] { group->reduce_scatter(shard, full); });
        if (group->rank() == 0) {
          auto cell = [&](double seconds, double factor) {
            char text[32];
            std::snprintf(text, sizeof(text), "%.2f (%.1f)", bytes / seconds * factor / 1e9,
                          seconds * 1e3);
            return std::string(text);
          };
          std::printf("%-6d %-5s %18s %18s %18s\n", mb, dtype == at::kFloat ? "fp32" : "bf16",
                      cell(ar, 2 * ring).c_str(), cell(ag, ring).c_str(), cell(rs, ring).c_str());
          std::fflush(stdout);
        }
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "comm_bandwidth: %s\n", e.what());
    return 1;
  }
}
