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
  out.units.push_back({"root", {}, 0});
  std::unordered_map<const void*, std::string> owner;  // parameter -> its unit's name
  std::unordered_set<std::string> unit_names{"root"};
  std::unordered_set<const void*> in_units;  // every parameter of a unit's module
  for (const auto& spec : plan.units()) {
    DS_CHECK(unit_names.insert(spec.name).second, ConfigError, "sharding plan of ", model.name(),
             ": two units are named '", spec.name, "'");
    std::string path;
    DS_CHECK(module_path(model, *spec.module, path) && !path.empty(), ConfigError,
             "sharding plan of ", model.name(), ": unit '", spec.name,
             "' is not a submodule of the model");
    UnitPlan::Unit unit{spec.name, {}, out.engine_unit.size() + 1};
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
    // A unit whose parameters are all frozen (a frozen block; a pipeline stage's view of another
    // stage's blocks) gets no engine unit: frozen parameters are module state, never gathered.
    DS_CHECK(!spec.module->parameters().empty(), ConfigError, "sharding plan of ", model.name(),
             ": unit '", spec.name, "' has no parameters; leave it out of the plan");
    for (const at::Tensor& p : spec.module->parameters()) in_units.insert(key(p));
    if (unit.params.empty()) {
      out.engine_unit.push_back(UnitPlan::kUngathered);
      continue;
    }
    out.engine_unit.push_back(out.units.size());
    out.units.push_back(std::move(unit));
  }
  std::unordered_set<const void*> seen;
  bool root_holds_any = false;  // trainable or frozen
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    const at::Tensor& p = item.value();
    root_holds_any = root_holds_any || !in_units.count(key(p)) || tied.count(key(p));
    if (!p.requires_grad() || owner.count(key(p)) || !seen.insert(key(p)).second) continue;
    out.units[0].params.push_back(entry(item.key(), p));
  }
  DS_CHECK(root_holds_any, ConfigError, "sharding plan of ", model.name(),
           ": every parameter is in a unit; the root unit (what no unit holds) needs at least one "
           "(e.g. an embedding or a final norm)");
  if (out.units[0].params.empty()) {
    // Nothing trainable outside the units (a middle pipeline stage): the first unit that holds
    // some is the root.
    DS_CHECK(out.units.size() > 1, ConfigError, "ZeRO-3: ", model.name(),
             " has no trainable parameters");
    out.units.erase(out.units.begin());
    for (size_t& u : out.engine_unit)
      if (u != UnitPlan::kUngathered) --u;
  }
  return out;
}

}  // namespace deepshard::zero
