// An identity on a unit's output whose backward runs a callback before any of the unit's own
// backward (design §2): autograd delivers the output's gradient to it first, so this is the
// point to re-gather the unit's parameters before backward needs them.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>

namespace deepshard::zero {

// Returns `output` unchanged (an alias carrying a new autograd node) if grad mode is on and it
// requires grad, else `output` itself. `callback` runs once when the gradient of the result
// arrives; it must outlive the graph (the engine owns it).
at::Tensor run_before_backward(const at::Tensor& output, const std::function<void()>* callback);

}  // namespace deepshard::zero
