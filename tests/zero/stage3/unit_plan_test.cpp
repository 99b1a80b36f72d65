// Resolving a model's declared sharding units (src/zero/unit_plan.h): units get the model's
// parameter names, frozen parameters stay out of every unit, declared tied parameters go to the
// root, and what the declaration gets wrong is a ConfigError naming it: a parameter shared by two
// units or by a unit and the root without being declared tied, a unit that is not part of the
// model, an unknown tied parameter, a unit without parameters, a model without a plan. A unit
// whose parameters are all frozen has no entry.
#include "zero/stage3/unit_plan.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "deepshard/util/error.h"

namespace deepshard::zero {
namespace unit_plan_test {

struct NetImpl : torch::nn::Module, sharding::Shardable {
  NetImpl() {
    emb = register_module("emb", torch::nn::Embedding(10, 4));
    a = register_module("a", torch::nn::Linear(4, 4));
    b = register_module("b", torch::nn::Linear(4, 4));
  }
  sharding::ShardingPlan sharding_plan() override {
    return sharding::ShardingPlan(calls).unit("A", a.ptr()).unit("B", b.ptr());
  }
  torch::nn::Embedding emb{nullptr};
  torch::nn::Linear a{nullptr}, b{nullptr};
  sharding::UnitCalls calls;
};
TORCH_MODULE(Net);

std::vector<std::string> names(const UnitPlan::Unit& unit) {
  std::vector<std::string> out;
  for (const auto& e : unit.params) out.push_back(e.name);
  return out;
}

template <typename Fn>
void expect_config_error(Fn&& fn, const std::string& want) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected '" << want << "'";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
}

TEST(UnitPlan, UnitsTakeTheModelsNamesFrozenStayOut) {
  Net net;
  net->b->bias.set_requires_grad(false);
  const UnitPlan plan = resolve_units(*net, declared_plan(*net));
  ASSERT_EQ(plan.units.size(), 3u);
  EXPECT_EQ(names(plan.units[0]), std::vector<std::string>{"emb.weight"});
  EXPECT_EQ(plan.units[1].name, "A");
  EXPECT_EQ(names(plan.units[1]), (std::vector<std::string>{"a.weight", "a.bias"}));
  EXPECT_EQ(names(plan.units[2]), std::vector<std::string>{"b.weight"});
}

// A unit whose parameters are all frozen (a frozen block, another pipeline stage's block) has no
// entry (it runs as it is); a root holding only frozen parameters gives its place to the first
// unit that holds trainable ones.
TEST(UnitPlan, AllFrozenUnitsAndRootStayEmpty) {
  Net net;
  net->b->weight.set_requires_grad(false);
  net->b->bias.set_requires_grad(false);
  net->emb->weight.set_requires_grad(false);
  const UnitPlan plan = resolve_units(*net, declared_plan(*net));
  // B has no entry; the root holds nothing trainable, so A is the root.
  ASSERT_EQ(plan.units.size(), 1u);
  EXPECT_EQ(plan.units[0].name, "A");
  EXPECT_EQ(plan.units[0].declared, 1u);
  EXPECT_EQ(names(plan.units[0]), (std::vector<std::string>{"a.weight", "a.bias"}));
  EXPECT_EQ(plan.engine_unit, (std::vector<size_t>{0, UnitPlan::kUngathered}));
  // With a trainable root, B alone has no entry.
  net->emb->weight.set_requires_grad(true);
  const UnitPlan rooted = resolve_units(*net, declared_plan(*net));
  ASSERT_EQ(rooted.units.size(), 2u);
  EXPECT_EQ(names(rooted.units[0]), std::vector<std::string>{"emb.weight"});
  EXPECT_EQ(rooted.engine_unit, (std::vector<size_t>{1, UnitPlan::kUngathered}));
}

TEST(UnitPlan, SharedBetweenTwoUnitsMustBeDeclaredThenGoesToTheRoot) {
  Net net;
  net->b->register_parameter("shared", net->a->weight);
  auto plan = declared_plan(*net);
  expect_config_error([&] { resolve_units(*net, plan); },
                      "parameter a.weight of unit 'A' is also registered as b.shared outside it; "
                      "declare it tied");
  plan.tie("a.weight", "unit B");
  const UnitPlan ok = resolve_units(*net, plan);
  EXPECT_EQ(names(ok.units[0]), (std::vector<std::string>{"emb.weight", "a.weight"}));
  EXPECT_EQ(names(ok.units[1]), std::vector<std::string>{"a.bias"});
  EXPECT_EQ(names(ok.units[2]), (std::vector<std::string>{"b.weight", "b.bias"}));
}

TEST(UnitPlan, SharedBetweenUnitAndRootMustBeDeclared) {
  Net net;
  // The embedding's weight registered again inside unit A (an output head reusing it).
  net->a->register_parameter("tied", net->emb->weight);
  auto plan = sharding::ShardingPlan(net->calls).unit("A", net->a.ptr());
  expect_config_error([&] { resolve_units(*net, plan); }, "also registered as emb.weight");
  plan.tie("emb.weight", "a.tied");
  const UnitPlan ok = resolve_units(*net, plan);
  EXPECT_EQ(names(ok.units[0]), (std::vector<std::string>{"emb.weight", "b.weight", "b.bias"}));
  EXPECT_EQ(names(ok.units[1]), (std::vector<std::string>{"a.weight", "a.bias"}));
}

TEST(UnitPlan, RefusesWhatTheDeclarationGetsWrong) {
  Net net;
  torch::nn::Linear stranger(4, 4);
  expect_config_error(
      [&] { resolve_units(*net, sharding::ShardingPlan(net->calls).unit("X", stranger.ptr())); },
      "unit 'X' is not a submodule of the model");
  expect_config_error(
      [&] { resolve_units(*net, sharding::ShardingPlan(net->calls).tie("nope", "head")); },
      "tied parameter 'nope' is not a parameter of the model");
  torch::nn::Functional empty(torch::relu);
  net->register_module("empty", empty);
  expect_config_error(
      [&] { resolve_units(*net, sharding::ShardingPlan(net->calls).unit("E", empty.ptr())); },
      "unit 'E' has no parameters");
  expect_config_error(
      [&] {
        resolve_units(
            *net,
            sharding::ShardingPlan(net->calls).unit("A", net->a.ptr()).unit("A", net->a.ptr()));
      },
      "two units are named 'A'");
  torch::nn::Linear plain(4, 4);
  expect_config_error([&] { declared_plan(*plain); }, "declares no sharding units");
}

}  // namespace unit_plan_test
}  // namespace deepshard::zero
