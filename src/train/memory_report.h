// The memory report of a run: the engine's MemoryLedger (what this rank allocated for model
// states and communication buffers, by category) beside the estimator's prediction for the same
// run, and the comm log's bytes per step beside the estimator's. `deepshard train
// --memory-report` prints the table on rank 0; summary.json always holds the JSON form.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "deepshard/zero/memory_ledger.h"
#include "zero/estimator.h"

namespace deepshard::train {

// {"parameters": {"ledger": bytes, "estimate": bytes}, ..., "model_states": {...},
//  "comm_buffers": {...}}
nlohmann::json memory_report_json(const zero::MemoryLedger& ledger,
                                  const zero::ModelStateEstimate& estimate);

// The same as an aligned text table (MiB and bytes), one line per category.
std::string format_memory_report(const zero::MemoryLedger& ledger,
                                 const zero::ModelStateEstimate& estimate);

// {"all_reduce": bytes, "reduce_scatter": bytes, "all_gather": bytes, "moved": bytes}
nlohmann::json comm_estimate_json(const zero::CommEstimate& estimate, int64_t world_size);

}  // namespace deepshard::train
