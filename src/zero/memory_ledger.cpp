// Implementation of the memory ledger (see memory_ledger.h).
#include "deepshard/zero/memory_ledger.h"

#include <algorithm>

#include "deepshard/util/error.h"

namespace deepshard::zero {

const char* to_string(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::kParameters:
      return "parameters";
    case MemoryCategory::kGradients:
      return "gradients";
    case MemoryCategory::kMasterWeights:
      return "master_weights";
    case MemoryCategory::kOptimizerState:
      return "optimizer_state";
    case MemoryCategory::kCommBuffers:
      return "comm_buffers";
    case MemoryCategory::kGatheredParams:
      return "gathered_params";
    case MemoryCategory::kSwapBuffers:
      return "swap_buffers";
    case MemoryCategory::kCount:
      break;
  }
  return "?";
}

const char* to_string(MemoryPlace place) {
  switch (place) {
    case MemoryPlace::kCompute:
      return "compute";
    case MemoryPlace::kHost:
      return "host";
    case MemoryPlace::kNvme:
      return "nvme";
    case MemoryPlace::kCount:
      break;
  }
  return "?";
}

void MemoryLedger::allocate(MemoryCategory category, int64_t bytes, MemoryPlace place) {
  std::lock_guard<std::mutex> lock(mu_);
  auto i = static_cast<size_t>(category);
  bytes_[i] += bytes;
  placed_[i][static_cast<size_t>(place)] += bytes;
  peak_[i] = std::max(peak_[i], bytes_[i]);
  total_ += bytes;
  peak_total_ = std::max(peak_total_, total_);
}

void MemoryLedger::release(MemoryCategory category, int64_t bytes, MemoryPlace place) {
  std::lock_guard<std::mutex> lock(mu_);
  auto i = static_cast<size_t>(category);
  auto& at = placed_[i][static_cast<size_t>(place)];
  DS_ASSERT(at >= bytes, "releasing more ", to_string(category), " than allocated");
  at -= bytes;
  bytes_[i] -= bytes;
  total_ -= bytes;
}

int64_t MemoryLedger::bytes(MemoryCategory category) const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_[static_cast<size_t>(category)];
}

int64_t MemoryLedger::bytes(MemoryCategory category, MemoryPlace place) const {
  std::lock_guard<std::mutex> lock(mu_);
  return placed_[static_cast<size_t>(category)][static_cast<size_t>(place)];
}

int64_t MemoryLedger::peak_bytes(MemoryCategory category) const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_[static_cast<size_t>(category)];
}

int64_t MemoryLedger::model_state_bytes() const {
  return bytes(MemoryCategory::kParameters) + bytes(MemoryCategory::kGradients) +
         bytes(MemoryCategory::kMasterWeights) + bytes(MemoryCategory::kOptimizerState);
}

int64_t MemoryLedger::total_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return total_;
}

int64_t MemoryLedger::peak_total_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_total_;
}

}  // namespace deepshard::zero
