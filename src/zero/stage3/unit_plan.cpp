// resolve_units and declared_plan (see unit_plan.h).
#include "zero/stage3/unit_plan.h"

#include <map>
#include <unordered_map>
#include <unordered_set>

#include "deepshard/util/error.h"

namespace deepshard::zero {
namespace {

FlatParamEntry entry(const std::string& name, const at::Tensor& param) {
  FlatParamEntry e;
  e.name = name;
  e.param = param;
  e.numel = param.numel();
  e.decay = param.dim() >= 2;
  return e;
}

const void* key(const at::Tensor& t) { return t.unsafeGetTensorImpl(); }

// The path of `module` inside `model` ("" for the model itself), or false if it is not part of it.
bool module_path(torch::nn::Module& model, const torch::nn::Module& module, std::string& path) {
  if (&model == &module) {
    path.clear();
    return true;
  }
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    if (item.value().get() == &module) {
      path = item.key();
      return true;
    }
  }
  return false;
}

}  // namespace

sharding::ShardingPlan declared_plan(torch::nn::Module& model) {
  if (auto* shardable = dynamic_cast<sharding::Shardable*>(&model))
    return shardable->sharding_plan();
  throw ConfigError("zero_optimization.stage=3: the model (" + model.name() +
                    ") declares no sharding units: implement deepshard::sharding::Shardable "
                    "(docs/sharding_api.md)");
}

std::vector<FlatParamEntry> trainable_entries(const std::string& prefix,
                                              torch::nn::Module& module) {
  std::vector<FlatParamEntry> out;
  std::unordered_set<const void*> seen;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    if (item.value().requires_grad() && seen.insert(key(item.value())).second)
      out.push_back(entry(prefix + "." + item.key(), item.value()));
  }
  return out;
}

UnitPlan resolve_units(torch::nn::Module& model, const sharding::ShardingPlan& plan) {
  // Every name the model registers each parameter under (a tensor registered twice has two).
  std::unordered_map<const void*, std::vector<std::string>> names;
  std::unordered_map<std::string, at::Tensor> by_name;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    names[key(item.value())].push_back(item.key());
    by_name.emplace(item.key(), item.value());
  }
  std::unordered_set<const void*> tied;
  for (const auto& t : plan.tied()) {
    auto it = by_name.find(t.param);
    DS_CHECK(it != by_name.end(), ConfigError, "sharding plan of ", model.name(),
             ": tied parameter '", t.param, "' is not a parameter of the model");
    tied.insert(key(it->second));
  }

  UnitPlan out;
  out.tied = plan.tied();
  out.units.push_back({"root", {}});
  std::unordered_map<const void*, std::string> owner;  // parameter -> its unit's name
  std::unordered_set<std::string> unit_names{"root"};
  for (const auto& spec : plan.units()) {
    DS_CHECK(unit_names.insert(spec.name).second, ConfigError, "sharding plan of ", model.name(),
             ": two units are named '", spec.name, "'");
    std::string path;
    DS_CHECK(module_path(model, *spec.module, path) && !path.empty(), ConfigError,
             "sharding plan of ", model.name(), ": unit '", spec.name,
             "' is not a submodule of the model");
    UnitPlan::Unit unit{spec.name, {}};
    for (const FlatParamEntry& e : trainable_entries(path, *spec.module)) {
      if (tied.count(key(e.param))) continue;  // the root's
      auto [at, fresh] = owner.emplace(key(e.param), spec.name);
      DS_CHECK(fresh, ConfigError, "sharding plan of ", model.name(), ": parameter ", e.name,
               " is in units '", at->second, "' and '", spec.name,
               "'; declare it tied (plan.tie) so that it stays in the root");
      // Registered elsewhere too (outside this unit's module): a use the unit does not cover.
      for (const auto& other : names[key(e.param)]) {
        DS_CHECK(other.rfind(path + ".", 0) == 0, ConfigError, "sharding plan of ", model.name(),
                 ": parameter ", e.name, " of unit '", spec.name, "' is also registered as ",
                 other, " outside it; declare it tied (plan.tie) so that it stays in the root");
      }
      // The model's name for it (its first registration), as checkpoints name it.
      unit.params.push_back(entry(names[key(e.param)].front(), e.param));
    }
    DS_CHECK(!unit.params.empty(), ConfigError, "sharding plan of ", model.name(), ": unit '",
             spec.name, "' has no trainable parameters of its own; leave it out of the plan");
    out.units.push_back(std::move(unit));
  }
  std::unordered_set<const void*> seen;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    const at::Tensor& p = item.value();
    if (!p.requires_grad() || owner.count(key(p)) || !seen.insert(key(p)).second) continue;
    out.units[0].params.push_back(entry(item.key(), p));
  }
  DS_CHECK(!out.units[0].params.empty(), ConfigError, "sharding plan of ", model.name(),
           ": every trainable parameter is in a unit; the root unit (what no unit holds) needs at "
           "least one (e.g. an embedding or a final norm)");
  return out;
}

}  // namespace deepshard::zero
