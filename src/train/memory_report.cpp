// Implementation of the memory report (memory_report.h).
#include "train/memory_report.h"

#include <cstdio>
#include <utility>
#include <vector>

namespace deepshard::train {
namespace {

struct Row {
  const char* name;
  int64_t ledger, estimate;
};

std::vector<Row> rows(const zero::MemoryLedger& ledger, const zero::ModelStateEstimate& e) {
  using zero::MemoryCategory;
  return {{"parameters", ledger.bytes(MemoryCategory::kParameters), e.params},
          {"gradients", ledger.bytes(MemoryCategory::kGradients), e.grads},
          {"master_weights", ledger.bytes(MemoryCategory::kMasterWeights), e.master},
          {"optimizer_state", ledger.bytes(MemoryCategory::kOptimizerState), e.optimizer},
          {"model_states", ledger.model_state_bytes(), e.total()},
          {"comm_buffers", ledger.bytes(MemoryCategory::kCommBuffers), e.comm_buffers}};
}

}  // namespace

nlohmann::json memory_report_json(const zero::MemoryLedger& ledger,
                                  const zero::ModelStateEstimate& estimate) {
  nlohmann::json out = nlohmann::json::object();
  for (const Row& r : rows(ledger, estimate)) {
    out[r.name] = {{"ledger", r.ledger}, {"estimate", r.estimate}};
  }
  return out;
}

std::string format_memory_report(const zero::MemoryLedger& ledger,
                                 const zero::ModelStateEstimate& estimate) {
  std::string text = "memory per rank (rank 0's ledger vs deepshard estimate for this run):\n";
  char line[160];
  std::snprintf(line, sizeof line, "  %-16s %14s %14s %9s\n", "category", "ledger MiB",
                "estimate MiB", "diff");
  text += line;
  for (const Row& r : rows(ledger, estimate)) {
    const double mib = 1024.0 * 1024.0;
    char diff[16] = "-";
    if (r.estimate > 0) {
      std::snprintf(diff, sizeof diff, "%+.2f%%",
                    100.0 * static_cast<double>(r.ledger - r.estimate) / r.estimate);
    }
    std::snprintf(line, sizeof line, "  %-16s %14.3f %14.3f %9s\n", r.name, r.ledger / mib,
                  r.estimate / mib, diff);
    text += line;
  }
  return text;
}

nlohmann::json comm_estimate_json(const zero::CommEstimate& estimate, int64_t world_size) {
  return {{"all_reduce", estimate.all_reduce},
          {"reduce_scatter", estimate.reduce_scatter},
          {"all_gather", estimate.all_gather},
          {"moved", estimate.moved(world_size)}};
}

}  // namespace deepshard::train
