// The host memory of gathered ZeRO-3 units: anonymous mappings of their own (not the heap), with
// a few released ones kept for the next gather of the same size. A fresh mapping costs a page
// allocation, zeroing and a TLB shootdown per page: measured on a 2-vCPU AMD EPYC VM, copying
// 6.5 MB into a fresh populated mapping ran at 0.7 GB/s against 43 GB/s into a reused one, which
// made stage 3's all-gathers its largest overhead. Reuse keeps the memory bound: the mappings
// resident (live + kept) never exceed the most that were live at once, and at most
// kMaxKeptMappings are kept, so a whole-model gather (consolidated weights) leaves little behind.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

namespace deepshard::zero {

class HostMappingPool {
 public:
  static constexpr size_t kMaxKeptMappings = 2;

  HostMappingPool() = default;
  ~HostMappingPool() { trim(); }  // the mappings still taken are their users' to give back
  HostMappingPool(const HostMappingPool&) = delete;
  HostMappingPool& operator=(const HostMappingPool&) = delete;

  // The process's pool (gathered units on the CPU use it).
  static HostMappingPool& instance();

  // `bytes` of zero-or-stale readable/writable memory (contents undefined): a kept mapping of
  // exactly that size, or a fresh one populated up front. Throws deepshard::Error if the kernel
  // refuses.
  void* take(size_t bytes);
  // Ends the use of a mapping from take(); kept for reuse or unmapped.
  void give_back(void* address, size_t bytes);

  struct Stats {
    size_t live_bytes = 0;        // taken and not given back
    size_t kept_bytes = 0;        // given back and kept for reuse
    size_t high_water_bytes = 0;  // the most live + kept at once
    size_t kept_mappings = 0;     // filled in by stats() from the kept list
    uint64_t fresh_mappings = 0;  // take() calls that mapped
    uint64_t reused_mappings = 0;
  };
  Stats stats() const;
  // Unmaps every kept mapping.
  void trim();

 private:
  void unmap_kept_locked(std::multimap<size_t, void*>::iterator it);

  mutable std::mutex mutex_;
  std::multimap<size_t, void*> kept_;  // size -> address
  Stats stats_;
};

}  // namespace deepshard::zero
