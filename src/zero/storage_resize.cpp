// Implementation of the storage helpers (see storage_resize.h). The storage's own allocator is
// used, so this works on any device (at::native::resize_bytes_cpu is the CPU-only form of it).
#include "zero/storage_resize.h"

#include <ATen/ATen.h>
#include <c10/core/StorageImpl.h>

#include "deepshard/util/error.h"

#include <cstdlib>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace deepshard::zero {

void free_storage(const at::Tensor& tensor) {
  c10::StorageImpl* storage = tensor.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(at::DataPtr(nullptr, storage->device()));
  storage->set_nbytes(0);
}

void allocate_storage(const at::Tensor& tensor, size_t bytes) {
  c10::StorageImpl* storage = tensor.storage().unsafeGetStorageImpl();
  DS_ASSERT(storage->nbytes() == 0, "allocate_storage: the storage still holds ", storage->nbytes(),
            " bytes");
  DS_CHECK(storage->resizable() && storage->allocator() != nullptr, Error,
           "allocate_storage: the storage of a ", tensor.sizes(), " ", tensor.scalar_type(),
           " tensor cannot be resized (external memory)");
  storage->set_data_ptr_noswap(storage->allocator()->allocate(bytes));
  storage->set_nbytes(bytes);
}

bool storage_allocated(const at::Tensor& tensor) { return tensor.storage().nbytes() > 0; }

at::Tensor storage_alias(const at::Tensor& tensor) {
  return at::empty({0}, tensor.options().requires_grad(false))
      .set_(tensor.storage(), tensor.storage_offset(), tensor.sizes(), tensor.strides());
}

void return_large_frees_to_os() {
#if defined(__GLIBC__)
  // A user's own glibc tuning (the MALLOC_MMAP_THRESHOLD_ environment variable) wins.
  static const bool done = [] {
    if (std::getenv("MALLOC_MMAP_THRESHOLD_") == nullptr) mallopt(M_MMAP_THRESHOLD, 1 << 20);
    return true;
  }();
  (void)done;
#endif
}

}  // namespace deepshard::zero
