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
                                    " (no pipeline engine yet; docs/parallel.md)");
  }
  if (p.tensor_parallel.effective_size() > 1) {
    config.other_features.push_back(
        "tensor_parallel.size=" + std::to_string(p.tensor_parallel.size) +
        " (the training engine does not split models over tensor ranks yet; docs/parallel.md)");
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
