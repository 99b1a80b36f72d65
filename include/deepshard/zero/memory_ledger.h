// An exact ledger of the model-state memory deepshard allocates, by category: every buffer the
// engine creates is recorded here at allocation with its byte size, and removed when freed. This
// is what `summary.json` and `--memory-report` show beside the estimator's prediction.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>

namespace deepshard::zero {

enum class MemoryCategory {
  kParameters,      // model parameters in compute dtype (replicated or this rank's shard)
  kGradients,       // gradient buffers (full or this rank's shard)
  kMasterWeights,   // fp32 master copy (when parameters are not fp32 already)
  kOptimizerState,  // Adam exp_avg and exp_avg_sq
  kCommBuffers,     // staging buffers for collectives
  kGatheredParams,  // stage 3: parameters gathered for the units running now
  kSwapBuffers,     // offload to NVMe: the reusable aligned buffers transfers go through
  kCount
};

// Where the bytes are: the compute device's memory, host memory (offload_* device cpu; on a CPU
// compute device the same RAM, counted apart), or NVMe swap files (not memory).
enum class MemoryPlace { kCompute, kHost, kNvme, kCount };

const char* to_string(MemoryCategory category);
const char* to_string(MemoryPlace place);  // "compute" | "host" | "nvme"

class MemoryLedger {
 public:
  void allocate(MemoryCategory category, int64_t bytes, MemoryPlace place = MemoryPlace::kCompute);
  void release(MemoryCategory category, int64_t bytes, MemoryPlace place = MemoryPlace::kCompute);
  int64_t bytes(MemoryCategory category) const;  // in every place
  int64_t bytes(MemoryCategory category, MemoryPlace place) const;
  int64_t peak_bytes(MemoryCategory category) const;
  // Parameters + gradients + master weights + optimizer state (what the estimator predicts).
  int64_t model_state_bytes() const;
  int64_t total_bytes() const;
  int64_t peak_total_bytes() const;

 private:
  static constexpr size_t kN = static_cast<size_t>(MemoryCategory::kCount);
  mutable std::mutex mu_;
  static constexpr size_t kP = static_cast<size_t>(MemoryPlace::kCount);
  std::array<int64_t, kN> bytes_{};
  std::array<std::array<int64_t, kP>, kN> placed_{};
  std::array<int64_t, kN> peak_{};
  int64_t total_ = 0, peak_total_ = 0;
};

}  // namespace deepshard::zero
