// Implementation of the storage helpers (see storage_resize.h). The storage's own allocator is
// used, so this works on any device (at::native::resize_bytes_cpu is the CPU-only form of it).
#include "zero/stage3/storage_resize.h"

#include <ATen/ATen.h>
#include <c10/core/StorageImpl.h>

#include <atomic>
#include <cstdlib>

#include "deepshard/util/error.h"
#include "zero/stage3/host_mapping_pool.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace deepshard::zero {

void free_storage(const at::Tensor& tensor) {
  c10::StorageImpl* storage = tensor.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(at::DataPtr(nullptr, storage->device()));
  storage->set_nbytes(0);
}

namespace {

// Host memory for a gathered unit: a mapping of its own from HostMappingPool, outside the heap
// (glibc would serve sizes under its mmap threshold from the heap, where a freed block in the
// middle stays resident).
struct HostMapping {
  void* address;
  size_t bytes;
};

void give_back(void* context) {
  auto* mapping = static_cast<HostMapping*>(context);
  HostMappingPool::instance().give_back(mapping->address, mapping->bytes);
  delete mapping;
}

at::DataPtr map_host_memory(size_t bytes, c10::Device device) {
  void* address = HostMappingPool::instance().take(bytes);
  return at::DataPtr(address, new HostMapping{address, bytes}, &give_back, device);
}

}  // namespace

void allocate_storage(const at::Tensor& tensor, size_t bytes) {
  c10::StorageImpl* storage = tensor.storage().unsafeGetStorageImpl();
  DS_ASSERT(storage->nbytes() == 0, "allocate_storage: the storage still holds ", storage->nbytes(),
            " bytes");
  DS_CHECK(storage->resizable() && storage->allocator() != nullptr, Error,
           "allocate_storage: the storage of a ", tensor.sizes(), " ", tensor.scalar_type(),
           " tensor cannot be resized (external memory)");
  const bool host = storage->device().is_cpu() && bytes > 0;
  storage->set_data_ptr_noswap(host ? map_host_memory(bytes, storage->device())
                                    : storage->allocator()->allocate(bytes));
  storage->set_nbytes(bytes);
}

bool storage_allocated(const at::Tensor& tensor) { return tensor.storage().nbytes() > 0; }

at::Tensor storage_alias(const at::Tensor& tensor) {
  return at::empty({0}, tensor.options().requires_grad(false))
      .set_(tensor.storage(), tensor.storage_offset(), tensor.sizes(), tensor.strides());
}

namespace {

std::atomic<bool> g_users_heap_settings{false};

// A user's own glibc tuning wins.
void set_mmap_threshold(int bytes) {
#if defined(__GLIBC__)
  if (!g_users_heap_settings.load()) mallopt(M_MMAP_THRESHOLD, bytes);
#else
  (void)bytes;
#endif
}

}  // namespace

void leave_mmap_threshold_to_user() { g_users_heap_settings.store(true); }

void return_large_frees_to_os() { set_mmap_threshold(1 << 20); }

void keep_freed_memory_for_reuse() { set_mmap_threshold(32 << 20); }

}  // namespace deepshard::zero
