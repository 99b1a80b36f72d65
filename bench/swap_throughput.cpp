// Swap throughput (not a test): writes then reads `--gib` GiB through io::AsyncIo into swap files
// in `--dir`, in transfers of `--transfer-mib` MiB (a sub-group's array), with the aio options
// given, and prints MiB/s for each direction (best of --repeat). scripts/bench_swap.sh runs it
// beside fio and dd on the same path.
// Usage: swap_throughput --dir D [--gib G] [--transfer-mib M] [--block-size B] [--queue-depth Q]
//        [--threads T] [--single-submit] [--no-overlap-events] [--in-flight K] [--repeat R]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "io/aligned_buffer.h"
#include "io/async_io.h"
#include "io/swap_file.h"
#include "util/stopwatch.h"

using namespace deepshard::io;

int main(int argc, char** argv) {
  std::string dir;
  double gib = 1.0, transfer_mib = 64;
  int in_flight = 2, repeat = 3;
  AioOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--dir")
      dir = next();
    else if (a == "--gib")
      gib = std::atof(next().c_str());
    else if (a == "--transfer-mib")
      transfer_mib = std::atof(next().c_str());
    else if (a == "--block-size")
      o.block_size = std::atoll(next().c_str());
    else if (a == "--queue-depth")
      o.queue_depth = std::atoll(next().c_str());
    else if (a == "--threads")
      o.threads = std::atoll(next().c_str());
    else if (a == "--single-submit")
      o.single_submit = true;
    else if (a == "--no-overlap-events")
      o.overlap_events = false;
    else if (a == "--in-flight")
      in_flight = std::atoi(next().c_str());
    else if (a == "--repeat")
      repeat = std::atoi(next().c_str());
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (dir.empty()) {
    std::fprintf(stderr, "usage: swap_throughput --dir D [options]\n");
    return 2;
  }
  const int64_t transfer = align_up(static_cast<int64_t>(transfer_mib * (1 << 20)));
  const int64_t count = std::max<int64_t>(1, static_cast<int64_t>(gib * (1 << 30)) / transfer);
  SwapDir swap(dir, "swap_throughput", 0, count * transfer);
  std::vector<std::unique_ptr<SwapFile>> files;
  for (int64_t i = 0; i < count; ++i)
    files.push_back(swap.create("t" + std::to_string(i) + ".swp", transfer));
  std::vector<AlignedBuffer> buffers;
  for (int i = 0; i < in_flight; ++i) {
    buffers.emplace_back(transfer, true);
    std::memset(buffers.back().data(), 0x5a, transfer);
  }
  AsyncIo aio(o);
  auto pass = [&](IoOp op) {
    std::vector<IoTicket> tickets(in_flight);
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < count; ++i) {
      aio.wait(tickets[i % in_flight]);  // the buffer's previous transfer
      tickets[i % in_flight] =
          aio.submit(op, *files[i], buffers[i % in_flight].data(), transfer, 0);
    }
    for (auto& t : tickets) aio.wait(t);
    const double s = deepshard::util::seconds_since(t0);
    return static_cast<double>(count * transfer) / (1 << 20) / s;
  };
  double best_write = 0, best_read = 0;
  for (int r = 0; r < repeat; ++r) {
    best_write = std::max(best_write, pass(IoOp::kWrite));
    best_read = std::max(best_read, pass(IoOp::kRead));
  }
  std::printf(
      "swap_throughput: %.2f GiB in %lld transfers of %.0f MiB, block %lld, depth %lld, "
      "threads %lld, single_submit %d, overlap_events %d, %d in flight: write %.0f MiB/s, "
      "read %.0f MiB/s\n",
      static_cast<double>(count * transfer) / (1 << 30), static_cast<long long>(count),
      transfer / double(1 << 20), static_cast<long long>(o.block_size),
      static_cast<long long>(o.queue_depth), static_cast<long long>(o.threads), o.single_submit,
      o.overlap_events, in_flight, best_write, best_read);
  return 0;
}
