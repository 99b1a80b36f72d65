// Implementation of HostMappingPool (see host_mapping_pool.h).
#include "zero/stage3/host_mapping_pool.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "deepshard/util/error.h"

namespace deepshard::zero {

HostMappingPool& HostMappingPool::instance() {
  static HostMappingPool* pool = new HostMappingPool();  // outlives every tensor's deleter
  return *pool;
}

void* HostMappingPool::take(size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = kept_.find(bytes);
    if (it != kept_.end()) {
      void* address = it->second;
      kept_.erase(it);
      stats_.kept_bytes -= bytes;
      stats_.live_bytes += bytes;
      stats_.reused_mappings += 1;
      return address;
    }
    // Resident memory stays within the high-water mark: kept mappings of other sizes make room.
    while (!kept_.empty() &&
           stats_.live_bytes + stats_.kept_bytes + bytes > stats_.high_water_bytes) {
      unmap_kept_locked(std::prev(kept_.end()));
    }
  }
  // Populated by the call itself: the gather writes every byte at once, and one call is far
  // cheaper than a page fault per page.
  void* address = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  DS_CHECK(address != MAP_FAILED, Error, "ZeRO-3: cannot map ", bytes,
           " bytes for a gathered unit: ", std::strerror(errno));
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.live_bytes += bytes;
  stats_.fresh_mappings += 1;
  stats_.high_water_bytes =
      std::max(stats_.high_water_bytes, stats_.live_bytes + stats_.kept_bytes);
  return address;
}

void HostMappingPool::give_back(void* address, size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.live_bytes -= bytes;
  if (kept_.size() == kMaxKeptMappings) unmap_kept_locked(std::prev(kept_.end()));
  // live + kept does not grow here, so the high-water bound holds.
  kept_.emplace(bytes, address);
  stats_.kept_bytes += bytes;
}

HostMappingPool::Stats HostMappingPool::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  Stats s = stats_;
  s.kept_mappings = kept_.size();
  return s;
}

void HostMappingPool::trim() {
  std::lock_guard<std::mutex> lock(mutex_);
  while (!kept_.empty()) unmap_kept_locked(kept_.begin());
}

void HostMappingPool::unmap_kept_locked(std::multimap<size_t, void*>::iterator it) {
  ::munmap(it->second, it->first);
  stats_.kept_bytes -= it->first;
  kept_.erase(it);
}

}  // namespace deepshard::zero
