// Implementation of op_flops.h.
#include "profiling/op_flops.h"

#include <ATen/core/Tensor.h>

#include <algorithm>
#include <string>

namespace deepshard::profiling::detail {
namespace {

bool is_tensor(c10::ArrayRef<const c10::IValue> in, size_t i) {
  return i < in.size() && in[i].isTensor() && in[i].toTensor().defined();
}

int64_t numel(c10::ArrayRef<const c10::IValue> in, size_t i) {
  return is_tensor(in, i) ? in[i].toTensor().numel() : 0;
}

// Elements of the broadcast of inputs 0 and 1 (a scalar operand broadcasts to the tensor).
int64_t broadcast_numel(c10::ArrayRef<const c10::IValue> in) {
  if (!is_tensor(in, 0)) return is_tensor(in, 1) ? numel(in, 1) : 1;
  if (!is_tensor(in, 1)) return numel(in, 0);
  const auto a = in[0].toTensor().sizes(), b = in[1].toTensor().sizes();
  const size_t n = std::max(a.size(), b.size());
  int64_t total = 1;
  for (size_t i = 0; i < n; ++i) {  // aligned from the right, as broadcasting does
    const int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    const int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    total *= std::max(da, db);
  }
  return total;
}

OpCount matmul(c10::ArrayRef<const c10::IValue> in, size_t a, size_t b) {
  if (!is_tensor(in, a) || !is_tensor(in, b)) return {};
  const int64_t macs = in[a].toTensor().numel() * in[b].toTensor().sizes().back();
  return {2 * macs, macs};
}

}  // namespace

OpCount op_flops(std::string_view op, c10::ArrayRef<const c10::IValue> in) {
  if (op == "aten::linear" || op == "deepshard::linear") {  // kernels/linear.h
    if (!is_tensor(in, 0) || !is_tensor(in, 1)) return {};
    const int64_t macs = numel(in, 0) * in[1].toTensor().size(0);
    return {2 * macs, macs};
  }
  if (op == "deepshard::causal_attention") {  // kernels/causal_attention.h: as the unfused ops
    if (!is_tensor(in, 0) || in.size() < 2 || !in[1].isInt()) return {};
    const auto qkv = in[0].toTensor().sizes();  // [B, T, 3C]
    const int64_t batch = qkv[0], seq = qkv[1], width = qkv[2] / 3;
    const int64_t macs = 2 * batch * seq * seq * width;           // q kᵀ and att v over all heads
    return {2 * macs + batch * in[1].toInt() * seq * seq, macs};  // + the softmax
  }
  if (op == "aten::matmul" || op == "aten::mm" || op == "aten::bmm") return matmul(in, 0, 1);
  if (op == "aten::addmm" || op == "aten::baddbmm") {
    OpCount c = matmul(in, 1, 2);
    c.flops += numel(in, 0);
    return c;
  }
  if (op == "aten::layer_norm") return {numel(in, 0) * (is_tensor(in, 2) ? 5 : 4), 0};
  if (op == "aten::softmax" || op == "aten::_softmax" || op == "aten::gelu" || op == "aten::relu" ||
      op == "aten::silu")
    return {numel(in, 0), 0};
  if (op == "aten::add" || op == "aten::sub" || op == "aten::mul" || op == "aten::div" ||
      op == "aten::add_" || op == "aten::mul_")
    return {broadcast_numel(in), 0, true};
  return {};  // embedding, dropout (0 in DeepSpeed), views, copies, the loss
}

}  // namespace deepshard::profiling::detail
