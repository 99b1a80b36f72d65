// ModuleTree (deepshard/zero/engine.h): a model's submodule tree as a torch::nn::Module holding the
// model's own tensors, with the sharding plan of its declared units and ties.
#include <torch/nn/module.h>

#include <map>
#include <set>
#include <unordered_map>

#include "deepshard/sharding/sharding_plan.h"
#include "deepshard/util/error.h"
#include "deepshard/zero/engine.h"

namespace deepshard::zero {
namespace {

std::string join(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

// Whether the module at `path` is `unit` or inside it.
bool within(const std::string& path, const std::string& unit) {
  return path == unit || path.rfind(unit + ".", 0) == 0;
}

class TreeModule : public torch::nn::Module, public sharding::Shardable {
 public:
  TreeModule(const ModuleTree::Node& root, std::vector<std::string> units)
      : torch::nn::Module("ModuleTree"), units_(std::move(units)) {
    add(*this, root, "");
    for (size_t i = 0; i < units_.size(); ++i) {
      bool found = false;
      for (const auto& item : named_modules("", /*include_self=*/false))
        found = found || item.key() == units_[i];
      DS_CHECK(found, ConfigError, "ModuleTree: unit '", units_[i], "' is not a submodule");
      for (size_t j = 0; j < i; ++j)
        DS_CHECK(!within(units_[i], units_[j]) && !within(units_[j], units_[i]), ConfigError,
                 "ModuleTree: unit '", units_[i], "' and unit '", units_[j],
                 "' overlap (one is inside the other)");
    }
  }

  sharding::UnitCalls& calls() { return calls_; }

  sharding::ShardingPlan sharding_plan() override {
    sharding::ShardingPlan plan(calls_);
    for (const auto& path : units_) plan.unit(path, named_modules()[path]);
    for (const auto& [param, places] : places_) {
      if (places.size() < 2 || !trainable_.count(param)) continue;
      // Tied when its places are not all outside units nor all inside one and the same unit.
      std::set<int> units;
      for (const auto& place : places) units.insert(unit_of(place));
      if (units.size() == 1) continue;
      std::string users;
      for (size_t k = 1; k < places.size(); ++k) users += (k > 1 ? ", " : "") + places[k];
      plan.tie(param, users);
    }
    return plan;
  }

 private:
  // The unit holding module path `path`, or -1.
  int unit_of(const std::string& path) const {
    for (size_t u = 0; u < units_.size(); ++u)
      if (within(path, units_[u])) return static_cast<int>(u);
    return -1;
  }

  void add(torch::nn::Module& module, const ModuleTree::Node& node, const std::string& prefix) {
    for (const auto& [name, tensor] : node.parameters) {
      DS_CHECK(tensor.defined(), ConfigError, "ModuleTree: parameter ", join(prefix, name),
               " is undefined");
      auto [it, fresh] = first_place_.emplace(tensor.unsafeGetTensorImpl(), join(prefix, name));
      places_[it->second].push_back(prefix);
      if (!fresh) continue;  // a tied tensor: one parameter, at its first place
      module.register_parameter(name, tensor, tensor.requires_grad());
      if (tensor.requires_grad()) trainable_.insert(it->second);
    }
    for (const auto& [name, tensor] : node.buffers) module.register_buffer(name, tensor);
    for (const auto& [name, child] : node.children) {
      auto sub = std::make_shared<torch::nn::Module>(name);
      module.register_module(name, sub);
      add(*sub, child, join(prefix, name));
    }
  }

  std::vector<std::string> units_;
  sharding::UnitCalls calls_;
  std::unordered_map<const void*, std::string> first_place_;  // TensorImpl -> parameter name
  std::map<std::string, std::vector<std::string>> places_;    // parameter -> module paths
  std::set<std::string> trainable_;
};

}  // namespace

ModuleTree::ModuleTree(const Node& root, std::vector<std::string> units) {
  auto module = std::make_shared<TreeModule>(root, std::move(units));
  calls_ = &module->calls();
  module_ = std::move(module);
}

}  // namespace deepshard::zero
