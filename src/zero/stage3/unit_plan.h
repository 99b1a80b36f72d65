// The stage-3 engine's view of a model's sharding plan (deepshard/sharding/sharding_plan.h): the
// declared units resolved to their trainable parameters, named as the model names them, plus the
// root unit (every trainable parameter in no unit, and the tied ones). Resolution checks what the
// declaration cannot express: a unit's module must be part of the model, a tied parameter must
// exist, and a parameter registered in two places (a unit and the root, or two units) must be
// declared tied.
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
  };
  std::vector<Unit> units;  // units[0] is the root; units[i + 1] is the plan's unit i
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
