// A host buffer aligned for O_DIRECT transfers (address and size multiples of kIoAlignment),
// optionally page-locked (mlock: DeepSpeed's pin_memory). Reused across transfers by its owner.
#pragma once

#include <cstddef>
#include <cstdint>

namespace deepshard::io {

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  // `bytes` is rounded up to kIoAlignment. `lock`: mlock the pages; if the kernel refuses
  // (RLIMIT_MEMLOCK) the buffer stays usable and locked() is false.
  explicit AlignedBuffer(int64_t bytes, bool lock = false);
  ~AlignedBuffer();
  AlignedBuffer(AlignedBuffer&& other) noexcept;
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;

  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  int64_t size() const { return size_; }
  bool locked() const { return locked_; }

 private:
  void release();
  void* data_ = nullptr;
  int64_t size_ = 0;
  bool locked_ = false;
};

}  // namespace deepshard::io
