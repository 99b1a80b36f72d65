// How each parameter of the tensor-parallel models is split over the tensor ranks (Megatron-LM's
// layout), from its name alone: no process group, no model, no torch, so the estimator and the
// checkpoint manifest use the same rule as parallel::TensorParallelGpt / TensorParallelLlama.
//  - models::Gpt: wte (vocabulary-parallel rows, tied to the head), attn.c_attn weight and bias
//    (column-parallel: each of q, k, v stacked in it split by rows), mlp.c_fc weight and bias
//    (column-parallel rows), attn.c_proj and mlp.c_proj weights (row-parallel: input columns; their
//    biases stay whole);
//  - models::Llama: model.embed_tokens and lm_head (vocabulary-parallel rows), self_attn.q_proj,
//    k_proj, v_proj and mlp.gate_proj, up_proj (column-parallel rows), self_attn.o_proj and
//    mlp.down_proj (row-parallel columns);
//  - everything else (LayerNorms, RMSNorms, wpe, row-parallel biases) is replicated.
#pragma once

#include <cstdint>
#include <string_view>

namespace deepshard::parallel {

enum class TensorSplit {
  kReplicated,  // whole on every tensor rank
  kRows,        // dim 0 in T contiguous chunks
  kColumns,     // dim 1 in T contiguous chunks
  kQkvRows,     // dim 0 = q, k, v stacked: each third in T chunks, rank t keeps its chunk of each
};

TensorSplit tensor_split(std::string_view name);

// The dimension `name` is split along (0 rows, 1 columns), or -1 when replicated.
int tensor_split_dim(std::string_view name);

// Elements of a parameter of `numel` elements that one of `tensor_size` ranks holds (the split
// dimensions are required to divide by the tensor size, so every rank holds the same share).
int64_t tensor_rank_numel(std::string_view name, int64_t numel, int64_t tensor_size);

}  // namespace deepshard::parallel
