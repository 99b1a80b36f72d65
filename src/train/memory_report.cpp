// Implementation of the memory report (memory_report.h).
#include "train/memory_report.h"

#include <cstdio>
#include <optional>
#include <utility>
#include <vector>

namespace deepshard::train {
namespace {

struct Row {
  const char* name;
  int64_t ledger, estimate;
  // The category's split by place (compute device / host / NVMe), when it has one.
  std::optional<zero::MemoryCategory> category;
  zero::PlacedBytes estimate_at;
};

std::vector<Row> rows(const zero::MemoryLedger& ledger, const zero::ModelStateEstimate& e) {
  using zero::MemoryCategory;
  zero::PlacedBytes swap_at;
  swap_at.host = e.swap_buffers;
  return {{"parameters", ledger.bytes(MemoryCategory::kParameters), e.params,
           MemoryCategory::kParameters, e.params_at},
          {"gradients", ledger.bytes(MemoryCategory::kGradients), e.grads,
           MemoryCategory::kGradients, e.grads_at},
          {"master_weights", ledger.bytes(MemoryCategory::kMasterWeights), e.master,
           MemoryCategory::kMasterWeights, e.master_at},
          {"optimizer_state", ledger.bytes(MemoryCategory::kOptimizerState), e.optimizer,
           MemoryCategory::kOptimizerState, e.optimizer_at},
          {"model_states", ledger.model_state_bytes(), e.total(), std::nullopt, {}},
          {"comm_buffers", ledger.bytes(MemoryCategory::kCommBuffers), e.comm_buffers,
           std::nullopt, {}},
          {"swap_buffers", ledger.bytes(MemoryCategory::kSwapBuffers), e.swap_buffers,
           MemoryCategory::kSwapBuffers, swap_at}};
}

constexpr zero::MemoryPlace kPlaces[] = {zero::MemoryPlace::kCompute, zero::MemoryPlace::kHost,
                                         zero::MemoryPlace::kNvme};

}  // namespace

nlohmann::json memory_report_json(const zero::MemoryLedger& ledger,
                                  const zero::ModelStateEstimate& estimate) {
  nlohmann::json out = nlohmann::json::object();
  for (const Row& r : rows(ledger, estimate)) {
    out[r.name] = {{"ledger", r.ledger}, {"estimate", r.estimate}};
    if (!r.category) continue;
    for (zero::MemoryPlace p : kPlaces) {
      out[r.name]["ledger_at"][zero::to_string(p)] = ledger.bytes(*r.category, p);
      out[r.name]["estimate_at"][zero::to_string(p)] = r.estimate_at.at(p);
    }
  }
  return out;
}

std::string format_memory_report(const zero::MemoryLedger& ledger,
                                 const zero::ModelStateEstimate& estimate) {
  std::string text = "memory per rank (rank 0's ledger vs deepshard estimate for this run):\n";
  char line[160];
  std::snprintf(line, sizeof line, "  %-16s %14s %14s %9s   %s\n", "category", "ledger MiB",
                "estimate MiB", "diff", "ledger (estimate) MiB on compute / host / nvme");
  text += line;
  const double mib = 1024.0 * 1024.0;
  for (const Row& r : rows(ledger, estimate)) {
    char diff[16] = "-";
    if (r.estimate > 0) {
      std::snprintf(diff, sizeof diff, "%+.2f%%",
                    100.0 * static_cast<double>(r.ledger - r.estimate) / r.estimate);
    }
    std::string places;
    if (r.category) {
      for (zero::MemoryPlace p : kPlaces) {
        char part[64];
        std::snprintf(part, sizeof part, "%s%.3f (%.3f)", places.empty() ? "" : " / ",
                      ledger.bytes(*r.category, p) / mib, r.estimate_at.at(p) / mib);
        places += part;
      }
    }
    std::snprintf(line, sizeof line, "  %-16s %14.3f %14.3f %9s   %s\n", r.name, r.ledger / mib,
                  r.estimate / mib, diff, places.c_str());
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
