// The memory profile (see memory_profile.h).
#include "train/memory_profile.h"

#include <cstdio>

namespace deepshard::train {
namespace {

using zero::MemoryCategory;

nlohmann::json profile(int64_t (*get)(const zero::MemoryLedger&, MemoryCategory),
                       const zero::MemoryLedger& ledger, const ActivationBytes& act, int64_t rss) {
  nlohmann::json out = nlohmann::json::object();
  int64_t model_states = 0;
  for (int c = 0; c < int(MemoryCategory::kCount); ++c) {
    const auto category = MemoryCategory(c);
    const int64_t bytes = get(ledger, category);
    out[zero::to_string(category)] = bytes;
    // The model states: what the estimator predicts (not gathered units, comm or swap buffers).
    if (category == MemoryCategory::kParameters || category == MemoryCategory::kGradients ||
        category == MemoryCategory::kMasterWeights || category == MemoryCategory::kOptimizerState)
      model_states += bytes;
  }
  out["model_states"] = model_states;
  out["activations_kept"] = act.kept;
  out["activations_transient"] = act.transient;
  out["rss"] = rss;
  return out;
}

double mib(const nlohmann::json& j, const char* key) {
  return j.value(key, int64_t(0)) / double(1 << 20);
}

}  // namespace

nlohmann::json memory_profile_json(const zero::MemoryLedger& ledger, const ActivationBytes& act,
                                   int64_t rss_bytes) {
  return profile([](const zero::MemoryLedger& l, MemoryCategory c) { return l.bytes(c); }, ledger,
                 act, rss_bytes);
}

nlohmann::json memory_peak_json(const zero::MemoryLedger& ledger, const ActivationBytes& act,
                                int64_t peak_rss_bytes) {
  return profile([](const zero::MemoryLedger& l, MemoryCategory c) { return l.peak_bytes(c); },
                 ledger, act, peak_rss_bytes);
}

std::string format_memory_breakdown(int64_t step, const nlohmann::json& p) {
  char line[512];
  std::snprintf(line, sizeof line,
                "memory step %lld (rank 0, MiB): parameters %.1f | gradients %.1f | master %.1f | "
                "optimizer %.1f | gathered %.1f | comm buffers %.1f | activations kept %.1f "
                "(transient %.1f) | rss %.1f\n",
                static_cast<long long>(step), mib(p, "parameters"), mib(p, "gradients"),
                mib(p, "master_weights"), mib(p, "optimizer_state"), mib(p, "gathered_params"),
                mib(p, "comm_buffers"), mib(p, "activations_kept"), mib(p, "activations_transient"),
                mib(p, "rss"));
  return line;
}

}  // namespace deepshard::train
