// Options of the asynchronous direct-I/O engine (DeepSpeed's `aio` section, with its defaults) and
// the fault hook tests use to make a transfer fail. Knows nothing of ZeRO or tensors.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace deepshard::io {

// O_DIRECT needs buffer addresses, file offsets and lengths aligned to the device's logical block;
// 4096 covers every common device (512 and 4096).
inline constexpr int64_t kIoAlignment = 4096;

inline int64_t align_up(int64_t bytes, int64_t alignment = kIoAlignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}

enum class IoOp { kRead, kWrite };
const char* to_string(IoOp op);  // "read" | "write"

// Called before each block is submitted: a non-zero errno makes that block fail as if the kernel
// had returned it (tests: an injected ENOSPC or EIO). Called from the I/O threads.
using FaultHook = std::function<int(IoOp op, const std::string& path, int64_t offset)>;

struct AioOptions {
  int64_t block_size = 1'048'576;  // aio.block_size: bytes per submitted request
  int64_t queue_depth = 8;         // aio.queue_depth: requests in flight per thread
  int64_t threads =
      1;  // aio.intra_op_parallelism (thread_count): one transfer split across threads
  bool single_submit = false;  // aio.single_submit: one io_submit call per request (else batches)
  bool overlap_events = true;  // aio.overlap_events: refill the queue as requests complete (else
                               // wait for the whole batch before submitting the next)
  FaultHook fault;             // tests only; empty in production
};

// A process-wide fault hook for tests, installed by the executable (never read from the
// environment here); AsyncIo uses it when its options carry none.
void set_process_fault_hook(FaultHook hook);
FaultHook process_fault_hook();

// Throws ConfigError naming the aio key when a value is out of range (block_size a positive
// multiple of kIoAlignment, queue_depth and threads >= 1).
void validate(const AioOptions& options);

}  // namespace deepshard::io
