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
// Gives `tensor`'s storage `bytes` fresh bytes from its own allocator (contents undefined).
void allocate_storage(const at::Tensor& tensor, size_t bytes);
bool storage_allocated(const at::Tensor& tensor);
// A tensor over `tensor`'s storage, offset and shape with its own version counter: writing
// through it (a collective's output) does not bump the version that autograd checks on `tensor`
// and its views.
at::Tensor storage_alias(const at::Tensor& tensor);

// Process-wide, once (glibc): allocations of 1 MiB and more are mmapped, so a freed storage goes
// back to the OS at once. By default glibc raises its mmap threshold (up to 32 MiB) whenever an
// mmapped block is freed, after which gathered units come from the heap and freeing them does not
// lower the process's RSS. A fixed threshold turns that adjustment off. No-op elsewhere.
void return_large_frees_to_os();

}  // namespace deepshard::zero
