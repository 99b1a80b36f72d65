// plan_sharding_units (see sharding_plan.h) for GPT: unit i + 1 is transformer block h.i, the root
// holds wte, wpe and ln_f; wte is tied to the output head (logits = ln_f(x) wte^T). The blocks are
// wrapped through GptImpl's block runner.
#include <unordered_set>

#include "deepshard/models/gpt.h"
#include "deepshard/util/error.h"
#include "zero/sharding_plan.h"

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

ShardingPlan gpt_plan(models::GptImpl& gpt) {
  ShardingPlan plan;
  plan.units.push_back({"root", {}});
  std::unordered_set<const void*> in_blocks;
  for (size_t i = 0; i < gpt.blocks.size(); ++i) {
    ShardingPlan::Unit unit{"h." + std::to_string(i), {}};
    unit.params = unit_entries(unit.name, *gpt.blocks[i]);
    for (const auto& e : unit.params) in_blocks.insert(e.param.unsafeGetTensorImpl());
    plan.units.push_back(std::move(unit));
  }
  std::unordered_set<const void*> seen;
  for (const auto& item : gpt.named_parameters(/*recurse=*/true)) {
    const at::Tensor& p = item.value();
    if (!p.requires_grad() || in_blocks.count(p.unsafeGetTensorImpl()) ||
        !seen.insert(p.unsafeGetTensorImpl()).second)
      continue;
    plan.units[0].params.push_back(entry(item.key(), p));
  }
  plan.tied.push_back({"wte.weight", "the output head (logits = ln_f(x) wte^T)"});
  models::GptImpl* model = &gpt;
  plan.install = [model](ShardingPlan::UnitRunner run, bool reverse_for_test) {
    model->set_block_runner(
        [run, model, reverse_for_test](int64_t index, models::Block& block, const at::Tensor& x) {
          if (reverse_for_test) {
            const int64_t other = int64_t(model->blocks.size()) - 1 - index;
            return run(size_t(other) + 1, [&] { return model->blocks[other]->forward(x); });
          }
          return run(size_t(index) + 1, [&] { return block->forward(x); });
        });
  };
  plan.uninstall = [model] { model->set_block_runner(nullptr); };
  return plan;
}

}  // namespace

std::vector<FlatParamEntry> unit_entries(const std::string& unit, torch::nn::Module& module) {
  std::vector<FlatParamEntry> out;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    if (item.value().requires_grad()) out.push_back(entry(unit + "." + item.key(), item.value()));
  }
  return out;
}

ShardingPlan plan_sharding_units(torch::nn::Module& model) {
  if (auto* gpt = dynamic_cast<models::GptImpl*>(&model)) return gpt_plan(*gpt);
  throw ConfigError(
      "zero_optimization.stage=3: the model (" + model.name() +
      ") declares no sharding units; deepshard knows GPT's (one unit per transformer block)");
}

}  // namespace deepshard::zero
