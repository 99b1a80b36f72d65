// Tests of AsyncIo (async_io.h): round trips under every combination of the aio options, alignment
// and range checks, concurrent transfers, and failures (injected errors) reported with the path.
#include "io/async_io.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "deepshard/util/error.h"
#include "io/aligned_buffer.h"
#include "io/swap_file.h"
#include "io_test_helpers.h"
#include "support/test_support.h"

namespace deepshard::io {
namespace async_io_test {

using deepshard::testing::TempDir;
using testing::fill_pattern;

struct Combo {
  int64_t block_size, queue_depth, threads;
  bool single_submit, overlap_events;
};

TEST(AsyncIo, RoundTripsUnderEveryOptionCombination) {
  TempDir dir;
  const int64_t bytes = 37 * kIoAlignment + 5 * 65536;  // not a multiple of any block size
  SwapFile file(dir.file("swap"), align_up(bytes) + 3 * kIoAlignment);
  AlignedBuffer out(bytes), in(bytes);
  uint32_t seed = 1;
  for (int64_t block : {int64_t{4096}, int64_t{65536}, int64_t{1} << 20}) {
    for (int64_t depth : {1, 8}) {
      for (int64_t threads : {1, 3}) {
        for (bool single : {false, true}) {
          for (bool overlap : {false, true}) {
            AioOptions o;
            o.block_size = block;
            o.queue_depth = depth;
            o.threads = threads;
            o.single_submit = single;
            o.overlap_events = overlap;
            AsyncIo aio(o);
            fill_pattern(out.data(), bytes, ++seed);
            std::memset(in.data(), 0, bytes);
            aio.write(file, out.data(), bytes, 2 * kIoAlignment);
            aio.read(file, in.data(), bytes, 2 * kIoAlignment);
            ASSERT_EQ(std::memcmp(in.data(), out.data(), bytes), 0)
                << "block " << block << " depth " << depth << " threads " << threads << " single "
                << single << " overlap " << overlap;
          }
        }
      }
    }
  }
}

TEST(AsyncIo, RefusesMisalignedBuffersLengthsOffsetsAndRangesBeyondTheFile) {
  TempDir dir;
  SwapFile file(dir.file("swap"), 4 * kIoAlignment);
  AlignedBuffer buf(2 * kIoAlignment);
  AsyncIo aio(AioOptions{});
  char* p = buf.as<char>();
  EXPECT_THROW(aio.write(file, p + 8, kIoAlignment, 0), IoError);
  EXPECT_THROW(aio.write(file, p, 100, 0), IoError);
  EXPECT_THROW(aio.write(file, p, kIoAlignment, 512), IoError);
  try {
    aio.read(file, p, 2 * kIoAlignment, 3 * kIoAlignment);
    FAIL() << "a read beyond the file's size was accepted";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(file.path()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("beyond its size"), std::string::npos) << e.what();
  }
}

TEST(AsyncIo, ConcurrentTransfersFromSeveralThreadsAndOverlappingTickets) {
  TempDir dir;
  const int64_t bytes = 64 * kIoAlignment;
  const int kFiles = 4;
  std::vector<std::unique_ptr<SwapFile>> files;
  for (int i = 0; i < kFiles; ++i)
    files.push_back(std::make_unique<SwapFile>(dir.file("f" + std::to_string(i)), 2 * bytes));
  AioOptions o;
  o.block_size = 16384;
  o.queue_depth = 4;
  o.threads = 2;
  AsyncIo aio(o);
  // Several tickets outstanding from one thread: both halves of every file at once.
  std::vector<AlignedBuffer> out, in;
  std::vector<IoTicket> tickets;
  for (int i = 0; i < 2 * kFiles; ++i) {
    out.emplace_back(bytes);
    in.emplace_back(bytes);
    fill_pattern(out.back().data(), bytes, 100 + i);
  }
  for (int i = 0; i < 2 * kFiles; ++i)
    tickets.push_back(
        aio.submit(IoOp::kWrite, *files[i / 2], out[i].data(), bytes, (i % 2) * bytes));
  for (auto& t : tickets) aio.wait(t);
  // Reads from several threads sharing the engine.
  std::vector<std::thread> threads;
  for (int i = 0; i < 2 * kFiles; ++i) {
    threads.emplace_back([&, i] { aio.read(*files[i / 2], in[i].data(), bytes, (i % 2) * bytes); });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < 2 * kFiles; ++i)
    EXPECT_EQ(std::memcmp(in[i].data(), out[i].data(), bytes), 0) << "transfer " << i;
}

TEST(AsyncIo, AnInjectedWriteErrorFailsTheTransferNamingPathOffsetAndErrno) {
  TempDir dir;
  SwapFile file(dir.file("swap"), 16 * kIoAlignment);
  AlignedBuffer buf(16 * kIoAlignment);
  for (bool overlap : {true, false}) {
    AioOptions o;
    o.block_size = kIoAlignment;
    o.queue_depth = 4;
    o.threads = 2;
    o.overlap_events = overlap;
    o.fault = [](IoOp op, const std::string&, int64_t offset) {
      return op == IoOp::kWrite && offset == 9 * kIoAlignment ? ENOSPC : 0;
    };
    AsyncIo aio(o);
    try {
      aio.write(file, buf.data(), 16 * kIoAlignment, 0);
      FAIL() << "the injected ENOSPC was not reported";
    } catch (const IoError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(file.path()), std::string::npos) << what;
      EXPECT_NE(what.find(std::strerror(ENOSPC)), std::string::npos) << what;
      EXPECT_NE(what.find("offset 36864"), std::string::npos) << what;
    }
    // The engine stays usable: reads are not affected by the hook.
    aio.read(file, buf.data(), 16 * kIoAlignment, 0);
  }
}

TEST(AsyncIo, RefusesBadOptionsNamingTheAioKey) {
  AioOptions o;
  o.block_size = 1000;
  EXPECT_THROW({ AsyncIo aio(o); }, ConfigError);
  o = AioOptions{};
  o.queue_depth = 0;
  EXPECT_THROW({ AsyncIo aio(o); }, ConfigError);
  o = AioOptions{};
  o.threads = 0;
  try {
    AsyncIo aio(o);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("aio.intra_op_parallelism"), std::string::npos);
  }
}

}  // namespace async_io_test
}  // namespace deepshard::io
