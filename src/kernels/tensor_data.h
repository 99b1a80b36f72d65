// ptr<T>(t): a tensor's data as T* without data_ptr<T>()'s dtype check, for the fused kernels that
// read bf16 storage as uint16_t lanes (simd.h) and fp32 alike.
#pragma once

#include <ATen/core/Tensor.h>

namespace deepshard::kernels {

template <typename T>
T* ptr(const at::Tensor& t) {
  return reinterpret_cast<T*>(t.data_ptr());
}

}  // namespace deepshard::kernels
