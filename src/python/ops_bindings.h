// deepshard._C.ops: the fused CPU kernels of the C++ models (include/deepshard/kernels) for Python
// tensors, each differentiable through its C++ autograd function. python/deepshard/ops.py wraps
// them as functions and torch.nn modules.
#pragma once

#include <pybind11/pybind11.h>

namespace deepshard::python {

// Adds the submodule `ops` to the extension module `m`.
void bind_ops(pybind11::module_& m);

}  // namespace deepshard::python
