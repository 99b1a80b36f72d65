// Implementation of ShmBarrier (see the header): counters with release/acquire ordering (what a
// rank wrote into its slots before arriving is visible to every rank that passed the barrier), a
// shared futex word, liveness checks with kill(pid, 0).
#include "comm/shm_barrier.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstring>

#include "comm/job_status.h"
#include "deepshard/util/error.h"

namespace deepshard::comm {
namespace {

using Clock = std::chrono::steady_clock;

void futex_wait(std::atomic<uint32_t>* word, uint32_t seen, std::chrono::nanoseconds max_wait) {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(max_wait.count() / 1000000000);
  ts.tv_nsec = static_cast<long>(max_wait.count() % 1000000000);
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

bool alive(int32_t pid) { return pid <= 0 || ::kill(pid, 0) == 0 || errno != ESRCH; }

}  // namespace

ShmBarrier::ShmBarrier(const ShmSegment& segment, int rank, std::chrono::milliseconds timeout)
    : header_(segment.header()),
      rank_(rank),
      world_size_(segment.header().world_size),
      timeout_(timeout) {}

std::string ShmBarrier::missing_ranks(uint64_t target) const {
  std::string list;
  for (int r = 0; r < world_size_; ++r) {
    if (header_.ranks[r].arrived.load(std::memory_order_acquire) >= target) continue;
    list += (list.empty() ? "" : ", ") + std::to_string(r);
  }
  return list;
}

// aborted_by: -1 none; kWriting while the first aborter writes its reason; then its rank.
constexpr int32_t kWriting = -2;

void ShmBarrier::check_aborted() const {
  int32_t by = header_.aborted_by.load(std::memory_order_acquire);
  while (by == kWriting) by = header_.aborted_by.load(std::memory_order_acquire);
  if (by < 0) return;
  throw CommError(detail::concat(
      "rank ", by, " gave up on the shared-memory transport: ", header_.abort_reason));
}

void ShmBarrier::abort(const std::string& reason) {
  int32_t expected = -1;
  if (header_.aborted_by.compare_exchange_strong(expected, kWriting)) {
    std::snprintf(header_.abort_reason, sizeof(header_.abort_reason), "%s", reason.c_str());
    header_.aborted_by.store(rank_, std::memory_order_release);
  }
  header_.wake.fetch_add(1, std::memory_order_release);
  futex_wake_all(&header_.wake);
}

void ShmBarrier::arrive_and_wait() {
  const uint64_t target = ++passed_;
  header_.ranks[rank_].arrived.store(target, std::memory_order_release);
  header_.wake.fetch_add(1, std::memory_order_release);
  futex_wake_all(&header_.wake);

  auto all_arrived = [&] {
    for (int r = 0; r < world_size_; ++r) {
      if (header_.ranks[r].arrived.load(std::memory_order_acquire) < target) return false;
    }
    return true;
  };
  for (int spin = 0; spin < 2000; ++spin) {
    if (all_arrived()) return;
    __builtin_ia32_pause();
  }
  const auto start = Clock::now();
  const auto deadline = start + timeout_;
  auto next_liveness_check = start;
  for (;;) {
    const uint32_t seen = header_.wake.load(std::memory_order_acquire);
    if (all_arrived()) return;
    check_aborted();
    // The job's store says a rank was lost (job_status.h): the most direct reason, at once.
    if (const std::string lost = job_lost_reason(std::chrono::milliseconds(0)); !lost.empty()) {
      const std::string reason = detail::concat("the job stops: ", lost, " (rank ", rank_,
                                                " waited at shared-memory barrier ", target, ")");
      abort(reason);
      throw CommError(reason);
    }
    const auto now = Clock::now();
    if (now >= next_liveness_check) {
      next_liveness_check = now + std::chrono::milliseconds(100);
      for (int r = 0; r < world_size_; ++r) {
        const int32_t pid = header_.ranks[r].pid.load();
        if (header_.ranks[r].arrived.load(std::memory_order_acquire) >= target || alive(pid)) {
          continue;
        }
        std::string reason = detail::concat("rank ", r, " (pid ", pid, ") died while rank ", rank_,
                                            " waited for it at shared-memory barrier ", target);
        abort(reason);
        throw CommError(reason);
      }
    }
    if (now >= deadline) {
      std::string reason = detail::concat(
          "timed out after ", timeout_.count(), " ms at shared-memory barrier ", target,
          " waiting for rank(s) ", missing_ranks(target), " (the group timeout)");
      abort(detail::concat("rank ", rank_, " ", reason));
      throw CommError(reason);
    }
    futex_wait(&header_.wake, seen,
               std::min<std::chrono::nanoseconds>(deadline - now, std::chrono::milliseconds(20)));
  }
}

}  // namespace deepshard::comm
