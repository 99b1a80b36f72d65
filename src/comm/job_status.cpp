// Implementation of the job status (see job_status.h).
#include "comm/job_status.h"

#include <condition_variable>
#include <mutex>

namespace deepshard::comm {
namespace {

std::mutex mutex;
std::condition_variable noted;
std::string lost_reason;

}  // namespace

void note_job_lost(const std::string& reason) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!lost_reason.empty()) return;
    lost_reason = reason;
  }
  noted.notify_all();
}

std::string job_lost_reason(std::chrono::milliseconds wait) {
  std::unique_lock<std::mutex> lock(mutex);
  noted.wait_for(lock, wait, [] { return !lost_reason.empty(); });
  return lost_reason;
}

}  // namespace deepshard::comm
