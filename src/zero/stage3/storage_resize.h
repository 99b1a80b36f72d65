// Freeing and re-allocating a tensor's storage in place (design §2, FSDP2's storage-resize
// technique). Autograd saves views of weights, and a view holds its storage: replacing a
// parameter's data would keep the full weight alive until backward. Shrinking the shared storage
// to 0 bytes frees the memory for every tensor viewing it; growing it back (contents undefined)
// makes the same tensors, including autograd's saved views, valid again once refilled.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>

namespace deepshard::zero {

// Gives `tensor`'s storage zero bytes (every view of it keeps its sizes but has no memory).
void free_storage(const at::Tensor& tensor);
// Gives `tensor`'s storage `bytes` fresh bytes (contents undefined): on the CPU an anonymous
// mapping of its own (HostMappingPool: kept for reuse within the high-water mark of gathered
// memory, otherwise returned to the OS when freed), elsewhere from the storage's allocator.
void allocate_storage(const at::Tensor& tensor, size_t bytes);
bool storage_allocated(const at::Tensor& tensor);
// A tensor over `tensor`'s storage, offset and shape with its own version counter: writing
// through it (a collective's output) does not bump the version that autograd checks on `tensor`
// and its views.
at::Tensor storage_alias(const at::Tensor& tensor);

// Process-wide malloc policy (glibc; no-op elsewhere; left alone after
// leave_mmap_threshold_to_user()). While a partitioned model is built, allocations of 1 MiB and
// more are mmapped, so the full parameter storage each unit replaces goes back to the OS at once
// (glibc raises its threshold up to 32 MiB after the first such free, and heap blocks freed in
// the middle stay resident). Training then keeps a fixed 32 MiB threshold: activations are
// reused from the heap instead of being mapped (and page-faulted) afresh on every step, which cost
// stage 3 a fifth of its throughput. Gathered units do not depend on it: on the CPU
// allocate_storage maps them outside the heap (HostMappingPool).
// The user chose the process's heap settings (the executable found MALLOC_MMAP_THRESHOLD_ or
// another glibc malloc setting in its environment, cli/process_options.h): the two calls below
// change nothing from then on.
void leave_mmap_threshold_to_user();
void return_large_frees_to_os();
void keep_freed_memory_for_reuse();

}  // namespace deepshard::zero
