// The tensor-parallel split rule by parameter name (tensor_split.h).
#include "deepshard/parallel/tensor_split.h"

#include <array>

namespace deepshard::parallel {
namespace {

bool ends_with(std::string_view name, std::string_view suffix) {
  return name.size() >= suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool ends_with_any(std::string_view name, const auto& suffixes) {
  for (std::string_view s : suffixes)
    if (ends_with(name, s)) return true;
  return false;
}

constexpr std::array<std::string_view, 9> kRowSuffixes = {
    "mlp.c_fc.weight",         "mlp.c_fc.bias",           "self_attn.q_proj.weight",
    "self_attn.k_proj.weight", "self_attn.v_proj.weight", "mlp.gate_proj.weight",
    "mlp.up_proj.weight",      "lm_head.weight",          "model.embed_tokens.weight"};
constexpr std::array<std::string_view, 4> kColumnSuffixes = {
    "attn.c_proj.weight", "mlp.c_proj.weight", "self_attn.o_proj.weight", "mlp.down_proj.weight"};
constexpr std::array<std::string_view, 2> kQkvSuffixes = {"attn.c_attn.weight", "attn.c_attn.bias"};

}  // namespace

TensorSplit tensor_split(std::string_view name) {
  if (name == "wte.weight") return TensorSplit::kRows;
  if (ends_with_any(name, kQkvSuffixes)) return TensorSplit::kQkvRows;
  if (ends_with_any(name, kRowSuffixes)) return TensorSplit::kRows;
  if (ends_with_any(name, kColumnSuffixes)) return TensorSplit::kColumns;
  return TensorSplit::kReplicated;
}

int tensor_split_dim(std::string_view name) {
  switch (tensor_split(name)) {
    case TensorSplit::kReplicated:
      return -1;
    case TensorSplit::kColumns:
      return 1;
    case TensorSplit::kRows:
    case TensorSplit::kQkvRows:
      return 0;
  }
  return -1;
}

int64_t tensor_rank_numel(std::string_view name, int64_t numel, int64_t tensor_size) {
  return tensor_split(name) == TensorSplit::kReplicated ? numel : numel / tensor_size;
}

}  // namespace deepshard::parallel
