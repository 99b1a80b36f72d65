// A tensor-parallel plan's rules and their lookup by parameter name (tensor_plan.h).
#include "deepshard/sharding/tensor_plan.h"

namespace deepshard::sharding {
namespace {

// `name` is `param` or ends with "." + param.
bool names(std::string_view name, std::string_view param) {
  if (name.size() < param.size() || name.compare(name.size() - param.size(), param.size(), param))
    return false;
  return name.size() == param.size() || name[name.size() - param.size() - 1] == '.';
}

}  // namespace

TensorPlan& TensorPlan::column(const std::string& module) {
  rules_.push_back({module + ".weight", TensorSplit::kRows});
  rules_.push_back({module + ".bias", TensorSplit::kRows});
  return *this;
}

TensorPlan& TensorPlan::fused_qkv_column(const std::string& module) {
  rules_.push_back({module + ".weight", TensorSplit::kQkvRows});
  rules_.push_back({module + ".bias", TensorSplit::kQkvRows});
  return *this;
}

TensorPlan& TensorPlan::row(const std::string& module) {
  rules_.push_back({module + ".weight", TensorSplit::kColumns});
  return *this;
}

TensorPlan& TensorPlan::vocab(const std::string& param) {
  rules_.push_back({param, TensorSplit::kRows});
  return *this;
}

TensorSplit TensorPlan::split(std::string_view name) const {
  for (const Rule& rule : rules_) {
    if (names(name, rule.param)) return rule.split;
  }
  return TensorSplit::kReplicated;
}

int TensorPlan::split_dim(std::string_view name) const {
  switch (split(name)) {
    case TensorSplit::kReplicated:
      return -1;
    case TensorSplit::kColumns:
      return 1;
    case TensorSplit::kRows:
    case TensorSplit::kQkvRows:
      return 0;
  }
  return -1;
}

int64_t TensorPlan::rank_numel(std::string_view name, int64_t numel, int64_t tensor_size) const {
  return split(name) == TensorSplit::kReplicated ? numel : numel / tensor_size;
}

}  // namespace deepshard::sharding
