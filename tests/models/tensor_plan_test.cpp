// sharding::TensorPlan: a rule names a module by the end of a parameter's path (at a dot), so the
// model's names and a block's own names split alike; column-parallel splits weight and bias rows,
// row-parallel the weight's columns only (the bias stays whole), vocabulary-parallel the rows of
// one parameter, fused q/k/v each third's rows; what no rule names is replicated.
#include "deepshard/sharding/tensor_plan.h"

#include <gtest/gtest.h>

namespace deepshard::sharding {
namespace tensor_plan_test {

TensorPlan plan() {
  TensorPlan p;
  p.fused_qkv_column("attn.qkv").row("attn.out").column("mlp.up").row("mlp.down");
  p.vocab("embed.weight");
  return p;
}

TEST(TensorPlan, RulesMatchTheEndOfANameAtADot) {
  const TensorPlan p = plan();
  EXPECT_EQ(p.split("layers.3.attn.qkv.weight"), TensorSplit::kQkvRows);
  EXPECT_EQ(p.split("attn.qkv.bias"), TensorSplit::kQkvRows);  // a block's own name
  EXPECT_EQ(p.split("layers.0.mlp.up.weight"), TensorSplit::kRows);
  EXPECT_EQ(p.split("layers.0.mlp.up.bias"), TensorSplit::kRows);
  EXPECT_EQ(p.split("layers.0.mlp.down.weight"), TensorSplit::kColumns);
  EXPECT_EQ(p.split("layers.0.mlp.down.bias"), TensorSplit::kReplicated);
  EXPECT_EQ(p.split("embed.weight"), TensorSplit::kRows);
  EXPECT_EQ(p.split("xmlp.up.weight"), TensorSplit::kReplicated);  // not at a dot
  EXPECT_EQ(p.split("layers.0.norm.weight"), TensorSplit::kReplicated);
  EXPECT_EQ(TensorPlan().split("layers.0.mlp.up.weight"), TensorSplit::kReplicated);
}

TEST(TensorPlan, DimensionsAndPerRankElements) {
  const TensorPlan p = plan();
  EXPECT_EQ(p.split_dim("attn.qkv.weight"), 0);
  EXPECT_EQ(p.split_dim("mlp.down.weight"), 1);
  EXPECT_EQ(p.split_dim("norm.weight"), -1);
  EXPECT_EQ(p.rank_numel("mlp.up.weight", 96, 4), 24);
  EXPECT_EQ(p.rank_numel("norm.weight", 96, 4), 96);
}

}  // namespace tensor_plan_test
}  // namespace deepshard::sharding
