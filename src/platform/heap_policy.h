// The C heap's policy for a training process. glibc's defaults hand memory back to the kernel
// eagerly: blocks above its (adaptive) mmap threshold are unmapped when freed and the heap's free
// top is trimmed, so a step's activations (megabyte tensors, allocated and freed every step) are
// page-faulted and zeroed by the kernel again at each step — 11 % of the CPU time of a `small`
// fp32 step on this machine (perf: clear_page, page faults, unmap; docs/performance.md).
// retain_freed_heap_memory() keeps freed memory in the process instead (mallopt: mmap threshold
// 32 MiB, the most glibc allows, no trimming below 1 GiB of free top, 64 MiB top pad), so the
// steady state reuses the same pages. Peak RSS stays what the peak allocation needs; RSS just does
// not fall between steps. `deepshard train` applies it at start; library users may call it.
// The user's own choice wins: nothing changes when MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_,
// MALLOC_TOP_PAD_ or a glibc.malloc GLIBC_TUNABLES entry is set, or DEEPSHARD_HEAP=system (the
// executable reads them from its environment, cli/process_options.h, and passes a HeapRequest).
#pragma once

#include <string>

namespace deepshard::platform {

struct HeapPolicy {
  bool retained = false;  // the mallopt settings above are in force
  std::string reason;     // one line for the log and summary.json ("retain freed memory (...)")
};

// The decision, from DEEPSHARD_HEAP's value (nullptr: unset) and the name of the user's own heap
// setting ("" when none): whether to apply the mallopt settings, and the reason line. Throws Error
// for a DEEPSHARD_HEAP other than "retain" or "system".
HeapPolicy choose_heap_policy(const char* deepshard_heap, const std::string& users_setting);

// What the process asks for (the executable reads both from its environment once at start).
struct HeapRequest {
  const char* deepshard_heap = nullptr;  // DEEPSHARD_HEAP: "retain" (nullptr), "system"
  std::string users_setting;  // the variable by which the user chose a heap policy already, or ""
};

// Applies choose_heap_policy's decision once per process (later calls return the first result).
// Not glibc: a no-op that says so. Throws Error as choose_heap_policy.
HeapPolicy retain_freed_heap_memory(const HeapRequest& request = {});

// What retain_freed_heap_memory() decided, or the C library's default when it was never called.
std::string heap_policy_status();

}  // namespace deepshard::platform
