// AlignedBuffer: posix_memalign + optional mlock (aligned_buffer.h).
#include "io/aligned_buffer.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "deepshard/util/error.h"
#include "io/aio_options.h"

namespace deepshard::io {

AlignedBuffer::AlignedBuffer(int64_t bytes, bool lock) : size_(align_up(bytes)) {
  DS_CHECK(bytes >= 0, Error, "AlignedBuffer: negative size ", bytes);
  if (size_ == 0) return;
  if (posix_memalign(&data_, kIoAlignment, static_cast<size_t>(size_)) != 0) {
    data_ = nullptr;
    throw std::bad_alloc();
  }
  // Touch the pages now (zeros), so that a transfer never faults them in and padding is defined.
  std::memset(data_, 0, static_cast<size_t>(size_));
  if (lock) locked_ = mlock(data_, static_cast<size_t>(size_)) == 0;
}

AlignedBuffer::~AlignedBuffer() { release(); }

AlignedBuffer::AlignedBuffer(AlignedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      locked_(std::exchange(other.locked_, false)) {}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    locked_ = std::exchange(other.locked_, false);
  }
  return *this;
}

void AlignedBuffer::release() {
  if (data_ == nullptr) return;
  if (locked_) munlock(data_, static_cast<size_t>(size_));
  std::free(data_);
  data_ = nullptr;
  size_ = 0;
  locked_ = false;
}

}  // namespace deepshard::io
