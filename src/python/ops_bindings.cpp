// The kernel bindings of deepshard._C.ops (see ops_bindings.h). Each call releases the GIL while
// the kernel runs, as torch's own operators do; backward runs in autograd's engine without Python.
#include "python/ops_bindings.h"

#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <optional>

#include "kernels/causal_attention.h"
#include "kernels/fused_ops.h"
#include "kernels/linear.h"
#include "platform/sgemm.h"

namespace py = pybind11;

namespace deepshard::python {
namespace {

at::Tensor or_undefined(const std::optional<at::Tensor>& t) { return t ? *t : at::Tensor(); }

}  // namespace

void bind_ops(py::module_& m) {
  auto ops = m.def_submodule("ops", "deepshard's fused CPU kernels (use deepshard.ops)");
  const auto no_gil = py::call_guard<py::gil_scoped_release>();
  ops.def(
      "linear",
      [](const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias) {
        return kernels::linear(x, weight, or_undefined(bias));
      },
      py::arg("x"), py::arg("weight"), py::arg("bias") = py::none(), no_gil);
  ops.def(
      "linear_supported",
      [](const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias) {
        return kernels::fused_linear_supported(x, weight, or_undefined(bias));
      },
      py::arg("x"), py::arg("weight"), py::arg("bias") = py::none(), no_gil);
  ops.def("layer_norm", &kernels::layer_norm, py::arg("x"), py::arg("weight"), py::arg("bias"),
          py::arg("eps"), no_gil);
  ops.def("gelu_tanh", &kernels::gelu_tanh, py::arg("x"), no_gil);
  ops.def("causal_softmax", &kernels::causal_softmax, py::arg("scores"), py::arg("scale"), no_gil);
  ops.def("causal_attention", &kernels::causal_attention, py::arg("qkv"), py::arg("n_head"),
          no_gil);
  ops.def("causal_attention_supported", &kernels::blocked_attention_supported, py::arg("qkv"),
          py::arg("n_head"), no_gil);
  ops.def("cross_entropy", &kernels::cross_entropy, py::arg("logits"), py::arg("targets"), no_gil);
  ops.def("fused_supported", &kernels::fused_supported, py::arg("x"));
  ops.def("sgemm_status", &platform::sgemm_status, no_gil);
}

}  // namespace deepshard::python
