// ModuleTree (deepshard/zero/engine.h): a model given as its submodule tree becomes a module
// holding the very same tensors (nothing copied), a tensor at two places is one parameter named by
// its first place, frozen parameters and buffers are kept as they are, the declared units resolve
// with a tie between units going to the root, and a unit path that is not a submodule or that
// overlaps another is a ConfigError naming it.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "deepshard/util/error.h"
#include "deepshard/zero/engine.h"
#include "zero/stage3/unit_plan.h"

namespace deepshard::zero {
namespace module_tree_test {

using Node = ModuleTree::Node;

// embed.weight (tied to head.weight) and embed.bias, blocks.0/1, a frozen gain and a buffer at the
// root.
struct Model {
  at::Tensor embed = torch::randn({8, 4}).requires_grad_(),
             bias = torch::zeros({4}).requires_grad_();
  at::Tensor w0 = torch::randn({4, 4}).requires_grad_(), w1 = torch::randn({4, 4}).requires_grad_();
  at::Tensor gain = torch::ones({4});
  at::Tensor positions = torch::arange(4);

  Node tree() const {
    Node root;
    root.parameters = {{"gain", gain}};
    root.buffers = {{"positions", positions}};
    Node embed_node, head_node, blocks, b0, b1;
    embed_node.parameters = {{"weight", embed}, {"bias", bias}};
    head_node.parameters = {{"weight", embed}};
    b0.parameters = {{"weight", w0}};
    b1.parameters = {{"weight", w1}};
    blocks.children = {{"0", b0}, {"1", b1}};
    root.children = {{"embed", embed_node}, {"blocks", blocks}, {"head", head_node}};
    return root;
  }
};

template <typename Fn>
void expect_config_error(Fn&& fn, const std::string& want) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected '" << want << "'";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
  }
}

TEST(ModuleTree, HoldsTheModelsOwnTensorsATiedOneOnce) {
  Model m;
  ModuleTree tree(m.tree());
  const auto params = tree.module()->named_parameters();
  std::vector<std::string> names;
  for (const auto& p : params) names.push_back(p.key());
  EXPECT_EQ(names, (std::vector<std::string>{"gain", "embed.weight", "embed.bias",
                                             "blocks.0.weight", "blocks.1.weight"}));
  EXPECT_TRUE(params["embed.weight"].is_same(m.embed));
  EXPECT_TRUE(params["blocks.1.weight"].is_same(m.w1));
  EXPECT_FALSE(params["gain"].requires_grad());
  EXPECT_TRUE(tree.module()->named_buffers()["positions"].is_same(m.positions));
}

TEST(ModuleTree, UnitsResolveWithATieBetweenUnitsInTheRoot) {
  Model m;
  ModuleTree tree(m.tree(), {"embed", "blocks.0", "blocks.1"});
  const UnitPlan plan = resolve_units(*tree.module(), declared_plan(*tree.module()));
  ASSERT_EQ(plan.units.size(), 4u);
  // The root: the weight tied between unit embed and head (outside the units); the frozen gain is
  // in no unit.
  ASSERT_EQ(plan.units[0].params.size(), 1u);
  EXPECT_EQ(plan.units[0].params[0].name, "embed.weight");
  ASSERT_EQ(plan.units[1].params.size(), 1u);
  EXPECT_EQ(plan.units[1].params[0].name, "embed.bias");
  ASSERT_EQ(plan.units[3].params.size(), 1u);
  EXPECT_EQ(plan.units[3].params[0].name, "blocks.1.weight");
}

TEST(ModuleTree, UnitThatIsNotASubmoduleIsNamed) {
  Model m;
  expect_config_error([&] { ModuleTree tree(m.tree(), {"blocks.2"}); },
                      "unit 'blocks.2' is not a submodule");
}

TEST(ModuleTree, OverlappingUnitsAreNamed) {
  Model m;
  expect_config_error(
      [&] {
        ModuleTree tree(m.tree(), {"blocks", "blocks.0"});
      },
      "unit 'blocks.0' and unit 'blocks' overlap");
}

}  // namespace module_tree_test
}  // namespace deepshard::zero
