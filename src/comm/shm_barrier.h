// The barrier of the shm transport: each rank counts the barriers it has reached in its own
// counter in the segment; a rank passes barrier k once every counter is >= k. Waiting spins
// briefly, then sleeps on a futex in the segment (woken at every arrival) in slices of at most
// 20 ms, checking between slices:
//  - the abort record: a rank that gave up wrote why; the others fail at once, quoting it;
//  - the job's store (job_status.h): a rank reported lost fails every waiter at once, naming it;
//  - whether the ranks not yet arrived are still alive (kill(pid, 0)): a dead rank fails the
//    others at once, naming it and its pid;
//  - the timeout (the group's): the wait fails naming the ranks that did not arrive.
// Every failure is recorded in the abort record first, so no rank is left waiting on a barrier
// another rank has given up on; later barriers fail at once.
#pragma once

#include <chrono>
#include <string>

#include "comm/shm_segment.h"

namespace deepshard::comm {

class ShmBarrier {
 public:
  ShmBarrier(const ShmSegment& segment, int rank, std::chrono::milliseconds timeout);

  // Throws CommError ("... at shared-memory barrier B: ...") as described above.
  void arrive_and_wait();
  // Records `reason` as this rank's (unless another rank aborted first) and wakes every waiter.
  void abort(const std::string& reason);
  // Throws CommError if some rank has aborted.
  void check_aborted() const;
  uint64_t count() const { return passed_; }

 private:
  std::string missing_ranks(uint64_t target) const;

  ShmHeader& header_;
  int rank_;
  int world_size_;
  std::chrono::milliseconds timeout_;
  uint64_t passed_ = 0;
};

}  // namespace deepshard::comm
