// The process's environment knobs, read once by the executable at start: the libraries read no
// environment variable (the rendezvous's and the launcher's aside). DEEPSHARD_LOG_LEVEL,
// DEEPSHARD_ADAM_ISA, DEEPSHARD_LINEAR, DEEPSHARD_HEAP and the C library's own heap settings.
#pragma once

#include <optional>
#include <string>

#include "deepshard/platform/heap_policy.h"

namespace deepshard::cli {

struct ProcessOptions {
  std::optional<std::string> log_level;  // DEEPSHARD_LOG_LEVEL: debug, info, warn, error
  std::optional<std::string> adam_isa;   // DEEPSHARD_ADAM_ISA: avx512, avx2, scalar
  std::optional<std::string> linear;     // DEEPSHARD_LINEAR: dnnl (default), torch
  std::optional<std::string> heap;       // DEEPSHARD_HEAP: retain (default), system
  // The variable by which the user chose a heap policy already (MALLOC_MMAP_THRESHOLD_,
  // MALLOC_TRIM_THRESHOLD_, MALLOC_TOP_PAD_, a glibc.malloc GLIBC_TUNABLES entry), or "".
  std::string users_heap_setting;

  platform::HeapRequest heap_request() const {
    return {heap ? heap->c_str() : nullptr, users_heap_setting};
  }
};

// The environment's knobs, read on the first call (empty values count as unset).
const ProcessOptions& process_options();

// Hands the log level, the Adam variant, the Linear backend and the user's own heap settings
// (stage 3's malloc thresholds leave them alone) to their layers (the heap policy is
// `deepshard train`'s). A bad value throws UsageError naming the variable and what it takes.
void apply_process_options(const ProcessOptions& options);

}  // namespace deepshard::cli
