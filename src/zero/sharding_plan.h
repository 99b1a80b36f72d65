// How a model is cut into ZeRO-3 sharding units, declared from outside the model (FSDP2's
// fully_shard idea): the units in forward order, the root unit (every trainable parameter in no
// other unit: it stays gathered, as FSDP keeps its root), the tied parameters (declared, not
// discovered: they must sit in the root, which is gathered whenever any of their users runs), and
// how to wrap each non-root unit's forward so the engine can gather before and release after it.
// The model code knows nothing of this. Supported models: GPT (a unit per transformer block).
#pragma once

#include <torch/nn/module.h>

#include <functional>
#include <string>
#include <vector>

#include "zero/flat_params.h"

namespace deepshard::zero {

struct ShardingPlan {
  struct Unit {
    std::string name;
    std::vector<FlatParamEntry> params;  // name, param, decay (dim >= 2); offsets unset
  };
  std::vector<Unit> units;  // units[0] is the root; the others in forward order
  struct Tied {
    std::string param;  // the parameter's name
    std::string users;  // what else uses it
  };
  std::vector<Tied> tied;

  // Runs `body` (unit `unit`'s forward, unit >= 1) and returns its output; the engine's wrapper.
  using UnitRunner =
      std::function<at::Tensor(size_t unit, const std::function<at::Tensor()>& body)>;
  // Makes the model call the runner around every unit. `reverse_for_test`: run the units in the
  // reverse order (a test hook for the cross-rank divergence check; the numbers are then wrong).
  std::function<void(UnitRunner, bool reverse_for_test)> install;
  std::function<void()> uninstall;  // back to plain calls
};

// The trainable parameters of `module` as the entries of unit `unit` ("<unit>.<name>", decay for
// dim >= 2; offsets unset).
std::vector<FlatParamEntry> unit_entries(const std::string& unit, torch::nn::Module& module);

// The plan for `model`; throws ConfigError for a model without declared units.
ShardingPlan plan_sharding_units(torch::nn::Module& model);

}  // namespace deepshard::zero
