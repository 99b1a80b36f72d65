// The per-step memory profile (metrics.jsonl "memory", summary.json "memory_profile", and the
// memory_breakdown line): where a rank's bytes go. Model states by category and the stage-3
// gathered parameters and communication buffers come from the engine's MemoryLedger (exact,
// allocated by deepshard), activations kept at the peak from the ActivationTracker's meter
// (counted from the allocator), and the process's resident memory from the kernel (everything,
// including the allocator's free lists and the libraries).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "deepshard/zero/memory_ledger.h"

namespace deepshard::train {

struct ActivationBytes {
  int64_t kept = 0;       // kept for backward, at the pass's peak
  int64_t transient = 0;  // the most alive at any moment (with temporaries)
};

// {"parameters", "gradients", "master_weights", "optimizer_state", "gathered_params",
//  "comm_buffers", "model_states", "activations_kept", "activations_transient", "rss"}: bytes now
// (ledger), this step's activation peaks, RSS now.
nlohmann::json memory_profile_json(const zero::MemoryLedger& ledger, const ActivationBytes& act,
                                   int64_t rss_bytes);
// The same with the ledger's peaks, the run's activation peaks and the peak RSS (summary.json).
nlohmann::json memory_peak_json(const zero::MemoryLedger& ledger, const ActivationBytes& act,
                                int64_t peak_rss_bytes);

// One line (memory_breakdown: true, every steps_per_print steps, rank 0).
std::string format_memory_breakdown(int64_t step, const nlohmann::json& profile);

}  // namespace deepshard::train
