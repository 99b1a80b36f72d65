// PartitionSwapper (partition_swapper.h): per-partition swap files, the buffer pool and the
// read-ahead states.
#include "offload/partition_swapper.h"

#include <algorithm>
#include <cstring>

#include "deepshard/util/error.h"
#include "io/aligned_buffer.h"
#include "io/swap_file.h"

namespace deepshard::offload {

int64_t PartitionSwapper::file_bytes(const std::vector<int64_t>& bytes) {
  int64_t total = 0;
  for (int64_t b : bytes) total += io::align_up(b);
  return total;
}

int64_t PartitionSwapper::held_bytes(int64_t buffer_count, int64_t buffer_bytes) {
  return (buffer_count + 1) * io::align_up(buffer_bytes);
}

PartitionSwapper::PartitionSwapper(std::vector<int64_t> bytes, const PartitionSwapOptions& options)
    : bytes_(std::move(bytes)), buffer_bytes_(io::align_up(options.buffer_bytes)) {
  const int64_t largest = bytes_.empty() ? 0 : *std::max_element(bytes_.begin(), bytes_.end());
  DS_CHECK(largest <= buffer_bytes_, ConfigError,
           "zero_optimization.offload_param.buffer_size: a buffer of ", options.buffer_bytes,
           " bytes cannot hold the largest parameter partition (", largest, " bytes)");
  DS_CHECK(options.buffer_count >= 1, ConfigError,
           "zero_optimization.offload_param.buffer_count: must be at least 1, got ",
           options.buffer_count);
  dir_ = std::make_unique<io::SwapDir>(options.nvme_path, options.run, options.rank,
                                       file_bytes(bytes_));
  for (size_t p = 0; p < bytes_.size(); ++p) {
    files_.push_back(bytes_[p] > 0 ? dir_->create("param_partition" + std::to_string(p) + ".swp",
                                                  io::align_up(bytes_[p]))
                                   : nullptr);
  }
  for (int64_t i = 0; i < options.buffer_count; ++i)
    pool_.emplace_back(buffer_bytes_, options.pin_memory);
  pool_free_.assign(pool_.size(), true);
  write_buffer_ = std::make_unique<io::AlignedBuffer>(buffer_bytes_, options.pin_memory);
  slots_.resize(bytes_.size());
  aio_ = std::make_unique<io::AsyncIo>(options.aio);
}

PartitionSwapper::~PartitionSwapper() { aio_.reset(); }

int64_t PartitionSwapper::held_bytes() const {
  return static_cast<int64_t>(pool_.size()) * buffer_bytes_ + write_buffer_->size();
}

const std::string& PartitionSwapper::folder() const { return dir_->path(); }

void PartitionSwapper::write(size_t p, const void* data) { write(p, 0, data, bytes_[p]); }

void PartitionSwapper::write(size_t p, int64_t offset, const void* data, int64_t size) {
  DS_ASSERT(p < bytes_.size() && files_[p] != nullptr, "no swap file for partition ", p);
  DS_ASSERT(offset % io::kIoAlignment == 0 && offset + size <= bytes_[p] &&
                (size % io::kIoAlignment == 0 || offset + size == bytes_[p]),
            "unaligned partition write");
  DS_ASSERT(slots_[p].state == State::kOnDisk, "writing partition ", p, " while it is in RAM");
  std::memcpy(write_buffer_->data(), data, static_cast<size_t>(size));
  const int64_t padded = io::align_up(size);
  std::memset(write_buffer_->as<char>() + size, 0, static_cast<size_t>(padded - size));
  aio_->write(*files_[p], write_buffer_->data(), padded, offset);
}

int PartitionSwapper::take_buffer() {
  for (size_t i = 0; i < pool_free_.size(); ++i) {
    if (pool_free_[i]) {
      pool_free_[i] = false;
      return static_cast<int>(i);
    }
  }
  return -1;
}

bool PartitionSwapper::in_ram(size_t p) const { return slots_[p].state != State::kOnDisk; }

bool PartitionSwapper::prefetch(size_t p) {
  Slot& s = slots_[p];
  if (s.state != State::kOnDisk) return true;
  DS_ASSERT(files_[p] != nullptr, "partition ", p, " is not swapped");
  const int b = take_buffer();
  if (b < 0) return false;
  s.buffer = b;
  s.ticket = aio_->submit(io::IoOp::kRead, *files_[p], pool_[b].data(), io::align_up(bytes_[p]), 0);
  s.state = State::kInFlight;
  return true;
}

const void* PartitionSwapper::acquire(size_t p) {
  Slot& s = slots_[p];
  // Read-ahead of other partitions gives way to the one needed now.
  if (!prefetch(p)) drop_unused();
  DS_CHECK(prefetch(p), Error, "offload_param: all ", pool_.size(),
           " swap buffers are in use (zero_optimization.offload_param.buffer_count): raise it");
  if (s.state == State::kInFlight) {
    try {
      aio_->wait(s.ticket);
    } catch (...) {
      pool_free_[s.buffer] = true;
      s.state = State::kOnDisk;
      throw;
    }
  }
  s.state = State::kAcquired;
  return pool_[s.buffer].data();
}

void PartitionSwapper::release(size_t p) {
  Slot& s = slots_[p];
  if (s.state == State::kOnDisk) return;
  if (s.state == State::kInFlight) {
    try {
      aio_->wait(s.ticket);
    } catch (const IoError&) {
    }
  }
  pool_free_[s.buffer] = true;
  s.buffer = -1;
  s.state = State::kOnDisk;
}

void PartitionSwapper::drop_unused() {
  for (size_t p = 0; p < slots_.size(); ++p) {
    if (slots_[p].state == State::kInFlight || slots_[p].state == State::kRead) release(p);
  }
}

}  // namespace deepshard::offload
