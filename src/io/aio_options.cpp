// AioOptions checks and names (aio_options.h).
#include "io/aio_options.h"

#include <mutex>

#include "deepshard/util/error.h"

namespace deepshard::io {

namespace {
std::mutex g_hook_mu;
FaultHook g_hook;
}  // namespace

void set_process_fault_hook(FaultHook hook) {
  std::lock_guard<std::mutex> lock(g_hook_mu);
  g_hook = std::move(hook);
}

FaultHook process_fault_hook() {
  std::lock_guard<std::mutex> lock(g_hook_mu);
  return g_hook;
}

const char* to_string(IoOp op) { return op == IoOp::kRead ? "read" : "write"; }

void validate(const AioOptions& options) {
  DS_CHECK(options.block_size > 0 && options.block_size % kIoAlignment == 0, ConfigError,
           "aio.block_size: must be a positive multiple of ", kIoAlignment,
           " bytes (direct I/O alignment), got ", options.block_size);
  DS_CHECK(options.queue_depth >= 1 && options.queue_depth <= 4096, ConfigError,
           "aio.queue_depth: must be in [1, 4096], got ", options.queue_depth);
  DS_CHECK(options.threads >= 1 && options.threads <= 256, ConfigError,
           "aio.intra_op_parallelism: must be in [1, 256], got ", options.threads);
}

}  // namespace deepshard::io
