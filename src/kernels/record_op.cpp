// record_op (record_op.h). libtorch is built with NDEBUG and at::RecordFunction's layout depends
// on it, so this file is compiled with NDEBUG and without the precompiled header (CMakeLists.txt),
// as profiling/flops_profiler.cpp is.
#include "kernels/record_op.h"

#include <ATen/record_function.h>

namespace deepshard::kernels {

at::Tensor record_op(const char* name, std::vector<c10::IValue> inputs,
                     const std::function<at::Tensor()>& f) {
  RECORD_FUNCTION(name, inputs);
  return f();
}

}  // namespace deepshard::kernels
