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
  const int64_t stages = p.pipeline.effective_stages();
  if (stages > 1) {
    // A pipeline trains every architecture (fp32, bf16, fp16) at ZeRO stages 0 and 1
    // (docs/parallel.md).
    const std::string with = " with pipeline.stages=" + std::to_string(stages) + " (";
    if (config.zero.stage >= 2) {
      config.other_features.push_back(
          "zero_optimization.stage=" + std::to_string(config.zero.stage) + with +
          "DeepSpeed refuses it too, its PipelineEngine asserts ZeRO stage < 2: a pipeline "
          "accumulates every micro-batch's gradients and reduces them once at the step, so "
          "stage 2's per-micro-batch gradient partitioning frees nothing, and stage 3 would "
          "gather the stage's parameters again for every micro-batch's forward and backward; "
          "use stage 0 or 1)");
    }
    if (config.compression.enabled())
      config.other_features.push_back("compression" + with + "PowerSGD is not tested with it)");
    if (config.flops_profiler.enabled) {
      config.other_features.push_back("flops_profiler" + with +
                                      "the profiler measures rank 0's whole-model forward)");
    }
  }
  const int64_t tensor = p.tensor_parallel.effective_size();
  if (tensor > 1) {
    // Tensor parallelism trains with every ZeRO stage, in fp32, bf16 and fp16 (docs/parallel.md);
    // the rest is refused naming the key it meets.
    const std::string with = "tensor_parallel.size=" + std::to_string(tensor) + " with ";
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
