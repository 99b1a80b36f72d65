// The pipeline and tensor_parallel sections (deepshard/config/parallel_config.h), strict: a key
// deepshard does not implement is an unknown key, never silently ignored.
#include "config/parallel_section.h"

#include <nlohmann/json.hpp>

namespace deepshard::config {
namespace detail {
namespace {

// A present, non-empty section without "enabled" is enabled (as for the sections recognised by
// name only, feature_sections.cpp), so {"stages": 2} never silently means one stage.
bool present(const Section& root, const char* key) {
  const nlohmann::json* v = root.get(key);
  return v != nullptr && v->is_object() && !v->empty();
}

ParallelConfig read(Section& root) {
  ParallelConfig p;
  p.pipeline.enabled = present(root, "pipeline");
  p.tensor_parallel.enabled = present(root, "tensor_parallel");
  Section pipeline = root.child("pipeline");
  pipeline.field("enabled", p.pipeline.enabled);
  pipeline.field("stages", p.pipeline.stages, Check::at_least(1));
  pipeline.field("partition_method", p.pipeline.partition_method,
                 Check::one_of({"uniform", "parameters"}));
  pipeline.finish();
  Section tensor = root.child("tensor_parallel");
  tensor.field("enabled", p.tensor_parallel.enabled);
  tensor.field("size", p.tensor_parallel.size, Check::at_least(1));
  tensor.finish();
  return p;
}

}  // namespace

ParallelConfig parse_parallel(Section& root, DsConfig& config) {
  ParallelConfig p = read(root);
  if (p.pipeline.effective_stages() > 1) {
    config.other_features.push_back("pipeline.stages=" + std::to_string(p.pipeline.stages) +
                                    " (the pipeline engine runs below the trainer only, not yet in "
                                    "deepshard train; docs/parallel.md)");
  }
  const int64_t tensor = p.tensor_parallel.effective_size();
  if (tensor > 1) {
    // Tensor parallelism trains with every ZeRO stage in fp32 (docs/parallel.md); the rest is
    // refused naming the key it meets.
    const std::string with = "tensor_parallel.size=" + std::to_string(tensor) + " with ";
    if (config.fp16.enabled || config.bf16.enabled) {
      config.other_features.push_back(
          with + (config.fp16.enabled ? "fp16.enabled" : "bf16.enabled") +
          " (tensor parallelism is tested in fp32 only; docs/parallel.md)");
    }
    if (config.compression.enabled()) {
      config.other_features.push_back(with +
                                      "compression (PowerSGD is not tested with tensor "
                                      "parallelism)");
    }
  }
  return p;
}

}  // namespace detail

ParallelConfig parse_parallel_config(const nlohmann::json& json, const std::string& origin) {
  detail::Diagnostics diag(origin, nullptr);
  detail::Section root(json.is_object() ? &json : nullptr, "", diag);
  ParallelConfig p = detail::read(root);
  diag.throw_if_errors();
  return p;
}

}  // namespace deepshard::config
