// Multi-rank scenarios for the job-level reliability tests (tests/comm/job_test.cpp): ranks that
// keep communicating until told to stop, so that a test can kill one of them (kill -9, with or
// without the launcher) or let a stranger knock at the store while the job runs.
#include <ATen/ATen.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include "workers/worker.h"

namespace deepshard::testing {
namespace {

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

// args[0]: a folder. Each rank writes <folder>/pid.<rank> (its pid), then all-reduces every 20 ms
// until <folder>/stop exists (rank 0 looks and tells the others) or 120 s pass; every all-reduce
// result is checked.
DS_WORKER_SCENARIO(communicate_until_stopped) {
  DS_WORKER_EXPECT(!args.empty(), "usage: communicate_until_stopped FOLDER");
  const std::string dir = args[0];
  const std::string pid_file = dir + "/pid." + std::to_string(group.rank());
  { std::ofstream(pid_file + ".tmp") << ::getpid() << "\n"; }
  std::rename((pid_file + ".tmp").c_str(), pid_file.c_str());
  const auto start = std::chrono::steady_clock::now();
  int64_t rounds = 0;
  for (;;) {
    at::Tensor t = at::ones({16});
    at::Tensor stop = at::zeros({1});
    if (group.rank() == 0 && exists(dir + "/stop")) stop.fill_(1);
    group.all_reduce(t);
    group.all_reduce(stop);
    DS_WORKER_EXPECT(t[0].item<float>() == float(group.size()),
                     "all_reduce gave " << t[0].item<float>());
    ++rounds;
    if (stop.item<float>() > 0) break;
    DS_WORKER_EXPECT(std::chrono::steady_clock::now() - start < std::chrono::seconds(120),
                     "never told to stop");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::printf("rank %d stopped after %lld rounds\n", group.rank(), static_cast<long long>(rounds));
}

// args[0]: a folder. Each rank writes <folder>/pid.<rank>, then computes alone for 120 s without
// any collective (no connection of the collectives can notice a dead peer: only the store's watch).
DS_WORKER_SCENARIO(compute_alone) {
  DS_WORKER_EXPECT(!args.empty(), "usage: compute_alone FOLDER");
  const std::string pid_file = args[0] + "/pid." + std::to_string(group.rank());
  { std::ofstream(pid_file + ".tmp") << ::getpid() << "\n"; }
  std::rename((pid_file + ".tmp").c_str(), pid_file.c_str());
  std::this_thread::sleep_for(std::chrono::seconds(120));
}

}  // namespace
}  // namespace deepshard::testing
