// The stage-3 engine's view of a model's sharding plan (deepshard/sharding/sharding_plan.h): the
// declared units resolved to their trainable parameters, named as the model names them, plus the
// root unit (every trainable parameter in no unit, and the tied ones); units with nothing to
// train left out. Resolution checks what the declaration cannot express: a unit's module must be
// part of the model, a tied parameter must exist, and a parameter registered in two places (a unit
// and the root, or two units) must be declared tied.
#pragma once

#include <torch/nn/module.h>

#include <string>
#include <vector>

#include "deepshard/sharding/sharding_plan.h"
#include "zero/flat_params.h"

namespace deepshard::zero {

struct UnitPlan {
  struct Unit {
    std::string name;
    std::vector<FlatParamEntry> params;  // name (the model's), param, decay; offsets unset
    size_t declared = 0;                 // 0: the root; i + 1: the plan's unit i
  };
  // units[0] is the root, then the plan's units that hold trainable parameters, in plan order. A
  // unit whose parameters are all frozen (a frozen block; another pipeline stage's block) has no
  // entry: it runs as it is, nothing gathered. When the root holds nothing trainable (a middle
  // pipeline stage), the first unit that does is the root (gathered for good).
  std::vector<Unit> units;
  // The plan's unit i is units[engine_unit[i]]; kUngathered: it has no entry (all frozen).
  static constexpr size_t kUngathered = static_cast<size_t>(-1);
  std::vector<size_t> engine_unit;
  std::vector<sharding::ShardingPlan::Tied> tied;
};

// The plan `model` declares (it implements sharding::Shardable); ConfigError if it declares none.
sharding::ShardingPlan declared_plan(torch::nn::Module& model);

UnitPlan resolve_units(torch::nn::Module& model, const sharding::ShardingPlan& plan);

// The trainable parameters of `module` in registration order, named "<prefix>.<name>" (decay for
// dim >= 2; offsets unset); tied parameters once.
std::vector<FlatParamEntry> trainable_entries(const std::string& prefix,
                                              torch::nn::Module& module);

}  // namespace deepshard::zero
