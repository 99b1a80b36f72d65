// The global gradient norm of a tensor-parallel model, and clipping by it, over every axis: the
// sum of squares of the split parameters' gradients over all tensor ranks, plus the replicated
// parameters' counted once (on tensor rank 0; their gradients are equal on every tensor rank), as
// Megatron's and DeepSpeed's clip_grad_norm do. REQUIRES: gradients already reduced over the data
// axis (equal on every data-parallel rank), as after a stage-0 all-reduce.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

#include "models/tensor_parallel_model.h"

namespace deepshard::parallel {

// L2 norm of all gradients of the whole (unsplit) model; collective over the tensor group.
double global_grad_norm(models::TensorParallelModel& model);

// Scales the gradients of `params` by max_norm / (norm + 1e-6) when that is below 1.
void scale_to_norm(const std::vector<at::Tensor>& params, double norm, double max_norm);

// Scales every gradient by max_norm / (norm + 1e-6) when that is below 1 (torch's
// clip_grad_norm_); returns the norm before clipping. Collective over the tensor group.
double clip_grad_norm(models::TensorParallelModel& model, double max_norm);

}  // namespace deepshard::parallel
