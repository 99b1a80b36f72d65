// Asynchronous direct I/O on swap files through Linux AIO (libaio: io_setup / io_submit /
// io_getevents), as DeepSpeed's csrc/aio. A transfer is split across `threads` worker threads
// (each with its own AIO context); each splits its part into `block_size` requests and keeps up
// to `queue_depth` of them in flight. submit() returns at once; wait() blocks until the transfer
// finished and throws IoError (naming the file, offset and errno) if any request failed. Buffers,
// offsets and lengths must be multiples of kIoAlignment. Why libaio rather than io_uring:
// docs/offload.md (measured on this machine).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "io/aio_options.h"

namespace deepshard::io {

class SwapFile;

namespace detail {
struct Transfer;
struct Worker;
}  // namespace detail

// A transfer in flight; wait on it through the AsyncIo that made it.
class IoTicket {
 public:
  IoTicket() = default;
  bool valid() const { return transfer_ != nullptr; }

 private:
  friend class AsyncIo;
  std::shared_ptr<detail::Transfer> transfer_;
};

class AsyncIo {
 public:
  explicit AsyncIo(AioOptions options);
  ~AsyncIo();  // waits for transfers in flight, stops the threads
  AsyncIo(const AsyncIo&) = delete;
  AsyncIo& operator=(const AsyncIo&) = delete;

  // Reads or writes `bytes` at `offset` of `file` from/into `buffer`. The file and buffer must
  // stay alive until wait() returned. Throws IoError at once for misaligned arguments or a range
  // beyond the file.
  IoTicket submit(IoOp op, const SwapFile& file, void* buffer, int64_t bytes, int64_t offset);
  // Blocks until the transfer is done; throws IoError if it failed (once; the ticket is then
  // spent). An invalid (default) ticket returns at once.
  void wait(IoTicket& ticket);
  // submit + wait.
  void read(const SwapFile& file, void* buffer, int64_t bytes, int64_t offset);
  void write(const SwapFile& file, void* buffer, int64_t bytes, int64_t offset);

  const AioOptions& options() const { return options_; }

 private:
  AioOptions options_;
  std::vector<std::unique_ptr<detail::Worker>> workers_;
};

}  // namespace deepshard::io
