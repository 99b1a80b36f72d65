// A model's tensor-parallel plan (Megatron-LM's layout): how each of its parameters is split over
// the T ranks of a tensor group, declared module by module by the model in its sharding plan
// (sharding_plan.h, next to its ZeRO units) and by its architecture's registry entry for whoever
// needs the rule without a model (the estimator, the split of each block as it is built, the
// checkpoint layout). A module is named by the end of its path ("attn.c_attn" matches
// "h.3.attn.c_attn"), so one plan serves the model's names and a block's own names alike. A
// parameter no rule names is replicated (whole on every tensor rank).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace deepshard::sharding {

enum class TensorSplit {
  kReplicated,  // whole on every tensor rank
  kRows,        // dim 0 in T contiguous chunks
  kColumns,     // dim 1 in T contiguous chunks
  kQkvRows,     // dim 0 = q, k, v stacked: each third in T chunks, rank t keeps its chunk of each
};

class TensorPlan {
 public:
  // Column-parallel Linear `module`: the rows (output features) of its weight and bias.
  TensorPlan& column(const std::string& module);
  // Column-parallel Linear `module` whose output stacks q, k and v: each third's rows.
  TensorPlan& fused_qkv_column(const std::string& module);
  // Row-parallel Linear `module`: its weight's columns (input features); its bias stays whole
  // (added once, after the reduction over the tensor ranks).
  TensorPlan& row(const std::string& module);
  // Vocabulary-parallel parameter `param` (an embedding or output head, [V, C]): its rows.
  TensorPlan& vocab(const std::string& param);

  TensorSplit split(std::string_view name) const;
  // The dimension `name` is split along (0 rows, 1 columns), or -1 when replicated.
  int split_dim(std::string_view name) const;
  // Elements of a parameter of `numel` elements that one of `tensor_size` ranks holds (the split
  // dimensions are required to divide by the tensor size, so every rank holds the same share).
  int64_t rank_numel(std::string_view name, int64_t numel, int64_t tensor_size) const;

 private:
  struct Rule {
    std::string param;  // the end of a parameter's name: "<module>.weight", "<module>.bias"
    TensorSplit split;
  };
  std::vector<Rule> rules_;
};

}  // namespace deepshard::sharding
