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
// MALLOC_TOP_PAD_ or a glibc.malloc GLIBC_TUNABLES entry is set, or DEEPSHARD_HEAP=system.
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

// The environment variable by which the user already chose a heap policy, or "".
std::string users_heap_setting();

// Applies the policy once per process (later calls return the first result). Not glibc: a no-op
// that says so. DEEPSHARD_HEAP other than "retain" (the default) or "system" throws Error.
HeapPolicy retain_freed_heap_memory();

// What retain_freed_heap_memory() decided, or the C library's default when it was never called.
std::string heap_policy_status();

}  // namespace deepshard::platform
