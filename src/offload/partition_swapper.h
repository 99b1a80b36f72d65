// ZeRO-Infinity's parameter swapping, without ZeRO: a rank's parameter partitions (one per unit,
// raw bytes) live in swap files; a pool of `buffer_count` aligned buffers of `buffer_bytes` holds
// the partitions read ahead or in use. prefetch() starts an asynchronous read into a free buffer,
// acquire() waits for it (reading now if it was not prefetched) and hands out the bytes, release()
// returns the buffer. write() puts updated bytes of a partition back on disk through a reserved
// buffer. RAM held: the pool plus the reserved buffer, whatever the model's size (DeepSpeed's
// AsyncPartitionedParameterSwapper).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/aio_options.h"
#include "io/async_io.h"

namespace deepshard::io {
class AlignedBuffer;
class SwapDir;
class SwapFile;
}  // namespace deepshard::io

namespace deepshard::offload {

struct PartitionSwapOptions {
  std::string nvme_path, run;  // files in <nvme_path>/<run>/rank<R>/
  int rank = 0;
  int64_t buffer_count = 5;  // offload_param.buffer_count
  int64_t buffer_bytes = 0;  // offload_param.buffer_size times the element size
  bool pin_memory = true;
  io::AioOptions aio;
};

class PartitionSwapper {
 public:
  // `bytes[p]`: partition p's size (0: not swapped). IoError / ConfigError (naming buffer_size)
  // when a partition does not fit a buffer.
  PartitionSwapper(std::vector<int64_t> bytes, const PartitionSwapOptions& options);
  ~PartitionSwapper();

  static int64_t file_bytes(const std::vector<int64_t>& bytes);
  static int64_t held_bytes(int64_t buffer_count, int64_t buffer_bytes);  // pool + reserved

  // Writes partition p whole (initial values).
  void write(size_t p, const void* data);
  // Writes `size` bytes at byte `offset` of partition p (offset a multiple of kIoAlignment; size
  // too unless the piece ends the partition).
  void write(size_t p, int64_t offset, const void* data, int64_t size);
  // Starts reading p into a free buffer; false when no buffer is free (nothing started). True
  // when p is already read, in flight or acquired.
  bool prefetch(size_t p);
  bool in_ram(size_t p) const;  // read, in flight or acquired
  // p's bytes in RAM (waits for its read; reads now if needed, dropping other partitions' unused
  // read-ahead if no buffer is free). Error naming buffer_count when every buffer is acquired.
  const void* acquire(size_t p);
  void release(size_t p);
  // Waits for reads in flight and frees every buffer not acquired (their data is stale after an
  // update).
  void drop_unused();
  int64_t held_bytes() const;
  const std::string& folder() const;

 private:
  enum class State { kOnDisk, kInFlight, kRead, kAcquired };
  struct Slot {
    State state = State::kOnDisk;
    int buffer = -1;
    io::IoTicket ticket;
  };
  int take_buffer();

  std::vector<int64_t> bytes_;
  int64_t buffer_bytes_;
  std::unique_ptr<io::SwapDir> dir_;
  std::vector<std::unique_ptr<io::SwapFile>> files_;
  std::vector<io::AlignedBuffer> pool_;
  std::vector<bool> pool_free_;
  std::unique_ptr<io::AlignedBuffer> write_buffer_;
  std::vector<Slot> slots_;
  std::unique_ptr<io::AsyncIo> aio_;  // declared last: destroyed first
};

}  // namespace deepshard::offload
