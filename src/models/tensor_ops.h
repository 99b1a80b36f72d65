// Megatron-LM's tensor-parallel operators (Shoeybi et al. 2019, megatron/core/tensor_parallel/
// mappings.py and cross_entropy.py) as libtorch autograd functions over a tensor-parallel group:
//  - f, copy_to_tensor_region: identity forward, all-reduce (sum) of the gradient backward; it
//    enters a column-parallel layer, whose input every tensor rank holds whole;
//  - g, reduce_from_tensor_region: all-reduce (sum) forward, identity backward; it leaves a
//    row-parallel layer, whose partial outputs add up to the whole;
//  - the vocabulary-parallel embedding and cross-entropy: each tensor rank holds the rows
//    [vocab_start, vocab_start + V/T) of the embedding (and of the tied output head) and never
//    the whole logits.
// With one tensor rank every operator is the plain single-rank computation.
#pragma once

#include <ATen/core/Tensor.h>

#include "deepshard/comm/group.h"

namespace deepshard::models {

at::Tensor copy_to_tensor_region(const at::Tensor& x, comm::Group& tensor);
at::Tensor reduce_from_tensor_region(const at::Tensor& x, comm::Group& tensor);

// idx [...] int64 of the whole vocabulary; weight [V/T, C] rows vocab_start.. of the embedding.
// Returns [..., C], the whole lookup on every tensor rank (rows not held here count zero before
// the all-reduce).
at::Tensor vocab_parallel_embedding(const at::Tensor& idx, const at::Tensor& weight,
                                    int64_t vocab_start, comm::Group& tensor);

// logits [N, V/T] (this rank's vocabulary slice, starting at vocab_start), targets [N] int64 of
// the whole vocabulary. Returns the mean cross-entropy over the N rows, the same on every tensor
// rank, computed in fp32 with a max, a sum of exponentials and the target logit all-reduced over
// the group; the gradient is softmax - one_hot on this rank's slice.
at::Tensor vocab_parallel_cross_entropy(const at::Tensor& logits, const at::Tensor& targets,
                                        int64_t vocab_start, comm::Group& tensor);

}  // namespace deepshard::models
