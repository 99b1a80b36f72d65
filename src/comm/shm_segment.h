// The shared-memory segment of the shm transport and its layout: a control header (per-rank
// arrival counters, pids, collective descriptors, the abort record) followed by, for every rank,
// two data slots and two result slots of slot_bytes each (two of each so that consecutive rounds
// alternate and one barrier per round suffices; see shm_transport.cpp).
//
// Rank 0 creates the segment under a fresh name ("/deepshard-<port>-<pid>-<n>", visible as
// /dev/shm/deepshard-...), the other ranks open it by that name (exchanged through the store), and
// rank 0 unlinks the name once every rank has mapped it: from then on the memory lives only as
// long as some rank maps it, so a killed job leaves nothing behind. Only the short window between
// creation and unlink can leak a name, and `deepshard launch` removes /dev/shm/deepshard-<port>-*
// when the job ends.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace deepshard::comm {

constexpr int kShmMaxRanks = 256;

// The description of a collective each rank publishes before its first barrier, so that ranks
// issuing different collectives fail with a clear message instead of mixing their data.
struct ShmOpDescriptor {
  uint64_t seq = 0;  // collective number on this rank, from 1
  int32_t kind = 0;  // ShmOpKind
  int32_t dtype = 0;
  int64_t numel = 0;
  int64_t arg = 0;   // reduce op, or broadcast root
};

struct alignas(64) ShmRankControl {
  std::atomic<uint64_t> arrived;  // barriers this rank has reached
  std::atomic<int32_t> pid;
  ShmOpDescriptor op[2];          // by collective number parity
};

struct ShmHeader {
  uint64_t magic;
  int32_t world_size;
  uint64_t slot_bytes;
  std::atomic<uint32_t> wake;        // futex word, bumped at every arrival
  std::atomic<int32_t> aborted_by;   // -1, or the rank that gave up first
  char abort_reason[1024];
  ShmRankControl ranks[kShmMaxRanks];
};

class ShmSegment {
 public:
  // Creates (rank 0) a segment for `world_size` ranks under a new name derived from `tag`.
  static ShmSegment create(const std::string& tag, int world_size, uint64_t slot_bytes);
  // Opens and maps the segment `name` created by rank 0.
  static ShmSegment open(const std::string& name);

  ShmSegment(ShmSegment&& other) noexcept;
  ShmSegment& operator=(ShmSegment&&) = delete;
  ~ShmSegment();  // unmaps; unlinks the name if this side created it and has not unlinked yet

  const std::string& name() const { return name_; }
  void unlink();  // removes the name (idempotent)

  ShmHeader& header() const { return *static_cast<ShmHeader*>(base_); }
  uint8_t* data_slot(int rank, int half) const { return slot(0, rank, half); }
  uint8_t* result_slot(int rank, int half) const { return slot(1, rank, half); }
  uint64_t slot_bytes() const { return header().slot_bytes; }

 private:
  ShmSegment(std::string name, void* base, size_t bytes, bool owner);
  uint8_t* slot(int area, int rank, int half) const;

  std::string name_;
  void* base_ = nullptr;
  size_t bytes_ = 0;
  bool owner_ = false;  // created it and the name still exists
};

}  // namespace deepshard::comm
