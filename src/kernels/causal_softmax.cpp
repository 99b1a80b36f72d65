// The fused causal softmax (fused_ops.h): one pass per row computes scale · scores, the causal
// mask (row i of each [T, T] matrix keeps columns 0..i), the max, the exponentials and the
// normalisation; backward dx = scale · y (dy - sum(dy · y)) in one more pass. No mask tensor and
// no intermediate tensors are allocated.
#include <torch/torch.h>

#include "deepshard/util/error.h"
#include "kernels/causal_softmax_rows.h"
#include "kernels/fused_ops.h"
#include "kernels/simd.h"
#include "kernels/tensor_data.h"

namespace deepshard::kernels {
namespace {

using simd::bf16_to_float;
using simd::exp_nonpositive;
using simd::float_to_bf16;

// Row of `cols` entries of which the first `valid` are unmasked; `buf` holds `cols` floats.
DS_SIMD_INLINE void softmax_row(const float* in, float* out, int64_t valid, int64_t cols,
                                float scale) {
  float max = -3.402823466e38f;
  for (int64_t j = 0; j < valid; ++j) max = in[j] * scale > max ? in[j] * scale : max;
  float sum = 0.0f;
  for (int64_t j = 0; j < valid; ++j) {
    out[j] = exp_nonpositive(in[j] * scale - max);
    sum += out[j];
  }
  const float inv = 1.0f / sum;
  for (int64_t j = 0; j < valid; ++j) out[j] *= inv;
  for (int64_t j = valid; j < cols; ++j) out[j] = 0.0f;
}

DS_SIMD_INLINE void softmax_grad_row(const float* y, const float* dy, float* dx, int64_t valid,
                                     int64_t cols, float scale) {
  float dot = 0.0f;
  for (int64_t j = 0; j < valid; ++j) dot += y[j] * dy[j];
  for (int64_t j = 0; j < valid; ++j) dx[j] = scale * y[j] * (dy[j] - dot);
  for (int64_t j = valid; j < cols; ++j) dx[j] = 0.0f;
}

}  // namespace

namespace detail {

DS_SIMD_KERNEL(causal_softmax_rows_f32,
               (const float* in, float* out, int64_t row0, int64_t rows, int64_t cols, int64_t t,
                float scale),
               (in, out, row0, rows, cols, t, scale)) {
  for (int64_t r = row0; r < row0 + rows; ++r)
    softmax_row(in + r * cols, out + r * cols, std::min(cols, r % t + 1), cols, scale);
}
DS_SIMD_KERNEL(causal_softmax_grad_rows_f32,
               (const float* y, const float* dy, float* dx, int64_t row0, int64_t rows,
                int64_t cols, int64_t t, float scale),
               (y, dy, dx, row0, rows, cols, t, scale)) {
  for (int64_t r = row0; r < row0 + rows; ++r)
    softmax_grad_row(y + r * cols, dy + r * cols, dx + r * cols, std::min(cols, r % t + 1), cols,
                     scale);
}
}  // namespace detail

namespace {

using detail::causal_softmax_grad_rows_f32;
using detail::causal_softmax_rows_f32;

DS_SIMD_KERNEL(forward_bf16,
               (const uint16_t* in, uint16_t* out, float* buf, int64_t row0, int64_t rows,
                int64_t cols, int64_t t, float scale),
               (in, out, buf, row0, rows, cols, t, scale)) {
  for (int64_t r = row0; r < row0 + rows; ++r) {
    for (int64_t j = 0; j < cols; ++j) buf[j] = bf16_to_float(in[r * cols + j]);
    softmax_row(buf, buf + cols, std::min(cols, r % t + 1), cols, scale);
    for (int64_t j = 0; j < cols; ++j) out[r * cols + j] = float_to_bf16(buf[cols + j]);
  }
}
DS_SIMD_KERNEL(backward_bf16,
               (const uint16_t* y, const uint16_t* dy, uint16_t* dx, float* buf, int64_t row0,
                int64_t rows, int64_t cols, int64_t t, float scale),
               (y, dy, dx, buf, row0, rows, cols, t, scale)) {
  for (int64_t r = row0; r < row0 + rows; ++r) {
    for (int64_t j = 0; j < cols; ++j) {
      buf[j] = bf16_to_float(y[r * cols + j]);
      buf[cols + j] = bf16_to_float(dy[r * cols + j]);
    }
    softmax_grad_row(buf, buf + cols, buf + 2 * cols, std::min(cols, r % t + 1), cols, scale);
    for (int64_t j = 0; j < cols; ++j) dx[r * cols + j] = float_to_bf16(buf[2 * cols + j]);
  }
}

struct CausalSoftmax : torch::autograd::Function<CausalSoftmax> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& scores,
                            double scale) {
    const at::Tensor x = scores.contiguous();
    const int64_t cols = x.size(-1), t = x.size(-2), rows = x.numel() / cols;
    at::Tensor y = at::empty_like(x);
    const float s = static_cast<float>(scale);
    at::parallel_for(0, rows, 64, [&](int64_t begin, int64_t end) {
      if (x.scalar_type() == at::kFloat) {
        causal_softmax_rows_f32(ptr<float>(x), ptr<float>(y), begin, end - begin, cols, t, s);
      } else {
        std::vector<float> buf(static_cast<size_t>(2 * cols));
        forward_bf16(ptr<uint16_t>(x), ptr<uint16_t>(y), buf.data(), begin, end - begin, cols, t,
                     s);
      }
    });
    ctx->save_for_backward({y});
    ctx->saved_data["scale"] = scale;
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const at::Tensor y = ctx->get_saved_variables()[0];
    const float s = static_cast<float>(ctx->saved_data["scale"].toDouble());
    const at::Tensor dy = grads[0].to(y.scalar_type()).contiguous();
    const int64_t cols = y.size(-1), t = y.size(-2), rows = y.numel() / cols;
    at::Tensor dx = at::empty_like(y);
    at::parallel_for(0, rows, 64, [&](int64_t begin, int64_t end) {
      if (y.scalar_type() == at::kFloat) {
        causal_softmax_grad_rows_f32(ptr<float>(y), ptr<float>(dy), ptr<float>(dx), begin,
                                     end - begin, cols, t, s);
      } else {
        std::vector<float> buf(static_cast<size_t>(3 * cols));
        backward_bf16(ptr<uint16_t>(y), ptr<uint16_t>(dy), ptr<uint16_t>(dx), buf.data(), begin,
                      end - begin, cols, t, s);
      }
    });
    return {dx, at::Tensor()};
  }
};

}  // namespace

at::Tensor causal_softmax(const at::Tensor& scores, double scale) {
  DS_CHECK(scores.dim() >= 2 && scores.size(-1) == scores.size(-2), Error,
           "causal_softmax: scores must be [..., T, T], got ", scores.sizes());
  if (!fused_supported(scores)) {
    const int64_t t = scores.size(-1);
    const at::Tensor mask =
        torch::full({t, t}, -std::numeric_limits<double>::infinity(), scores.options()).triu(1);
    return torch::softmax(scores * scale + mask, -1);
  }
  return CausalSoftmax::apply(scores, scale);
}

}  // namespace deepshard::kernels
