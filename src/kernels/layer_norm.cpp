// The fused layer norm (fused_ops.h) over the last dimension: forward one pass per row for the
// mean and variance (in fp32, read straight from bf16) and one writing y = (x - mean) rstd w + b;
// backward per row dx = rstd (g - mean(g) - xhat mean(g xhat)) with g = dy w, and the weight and
// bias gradients accumulated in fp32 per thread, summed once and rounded to the weights' dtype.
#include <torch/torch.h>

#include "deepshard/util/error.h"
#include "kernels/fused_ops.h"
#include "kernels/simd.h"
#include "kernels/tensor_data.h"

namespace deepshard::kernels {
namespace {

using simd::bf16_to_float;
using simd::float_to_bf16;

// Stats of one fp32 row: mean and 1/sqrt(var + eps) (two passes; the row is in L1).
DS_SIMD_INLINE void row_stats(const float* x, int64_t c, float eps, float* mean, float* rstd) {
  float sum = 0.0f;
  for (int64_t j = 0; j < c; ++j) sum += x[j];
  const float m = sum / float(c);
  float var = 0.0f;
  for (int64_t j = 0; j < c; ++j) var += (x[j] - m) * (x[j] - m);
  *mean = m;
  *rstd = 1.0f / __builtin_sqrtf(var / float(c) + eps);
}

DS_SIMD_INLINE void row_forward(const float* x, const float* w, const float* b, float* y, int64_t c,
                                float m, float r) {
  for (int64_t j = 0; j < c; ++j) y[j] = (x[j] - m) * r * w[j] + b[j];
}

// dx of one row; adds dy * xhat to dw and dy to db.
DS_SIMD_INLINE void row_backward(const float* x, const float* dy, const float* w, float* dx,
                                 float* dw, float* db, int64_t c, float m, float r) {
  float sum_g = 0.0f, sum_gx = 0.0f;
  for (int64_t j = 0; j < c; ++j) {
    const float xhat = (x[j] - m) * r, g = dy[j] * w[j];
    sum_g += g;
    sum_gx += g * xhat;
    dw[j] += dy[j] * xhat;
    db[j] += dy[j];
  }
  const float mg = sum_g / float(c), mgx = sum_gx / float(c);
  for (int64_t j = 0; j < c; ++j) dx[j] = r * (dy[j] * w[j] - mg - (x[j] - m) * r * mgx);
}

DS_SIMD_KERNEL(forward_f32,
               (const float* x, const float* w, const float* b, float* y, float* mean, float* rstd,
                int64_t row0, int64_t rows, int64_t c, float eps),
               (x, w, b, y, mean, rstd, row0, rows, c, eps)) {
  for (int64_t r = row0; r < row0 + rows; ++r) {
    row_stats(x + r * c, c, eps, mean + r, rstd + r);
    row_forward(x + r * c, w, b, y + r * c, c, mean[r], rstd[r]);
  }
}
// buf: 2c floats (the row in fp32, its output).
DS_SIMD_KERNEL(forward_bf16,
               (const uint16_t* x, const float* w, const float* b, uint16_t* y, float* mean,
                float* rstd, float* buf, int64_t row0, int64_t rows, int64_t c, float eps),
               (x, w, b, y, mean, rstd, buf, row0, rows, c, eps)) {
  for (int64_t r = row0; r < row0 + rows; ++r) {
    for (int64_t j = 0; j < c; ++j) buf[j] = bf16_to_float(x[r * c + j]);
    row_stats(buf, c, eps, mean + r, rstd + r);
    row_forward(buf, w, b, buf + c, c, mean[r], rstd[r]);
    for (int64_t j = 0; j < c; ++j) y[r * c + j] = float_to_bf16(buf[c + j]);
  }
}
DS_SIMD_KERNEL(backward_f32,
               (const float* x, const float* dy, const float* w, const float* mean,
                const float* rstd, float* dx, float* dw, float* db, int64_t row0, int64_t rows,
                int64_t c),
               (x, dy, w, mean, rstd, dx, dw, db, row0, rows, c)) {
  for (int64_t r = row0; r < row0 + rows; ++r)
    row_backward(x + r * c, dy + r * c, w, dx + r * c, dw, db, c, mean[r], rstd[r]);
}
// buf: 3c floats.
DS_SIMD_KERNEL(backward_bf16,
               (const uint16_t* x, const uint16_t* dy, const float* w, const float* mean,
                const float* rstd, uint16_t* dx, float* dw, float* db, float* buf, int64_t row0,
                int64_t rows, int64_t c),
               (x, dy, w, mean, rstd, dx, dw, db, buf, row0, rows, c)) {
  for (int64_t r = row0; r < row0 + rows; ++r) {
    for (int64_t j = 0; j < c; ++j) {
      buf[j] = bf16_to_float(x[r * c + j]);
      buf[c + j] = bf16_to_float(dy[r * c + j]);
    }
    row_backward(buf, buf + c, w, buf + 2 * c, dw, db, c, mean[r], rstd[r]);
    for (int64_t j = 0; j < c; ++j) dx[r * c + j] = float_to_bf16(buf[2 * c + j]);
  }
}

struct LayerNorm : torch::autograd::Function<LayerNorm> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& input,
                            const at::Tensor& weight, const at::Tensor& bias, double eps) {
    const at::Tensor x = input.contiguous();
    const int64_t c = x.size(-1), rows = x.numel() / c;
    // The affine parameters in fp32 (C elements: negligible next to the activations).
    const at::Tensor w = weight.to(at::kFloat).contiguous(), b = bias.to(at::kFloat).contiguous();
    at::Tensor y = at::empty_like(x);
    at::Tensor mean = at::empty({rows}, x.options().dtype(at::kFloat));
    at::Tensor rstd = at::empty({rows}, x.options().dtype(at::kFloat));
    const float e = static_cast<float>(eps);
    at::parallel_for(0, rows, 32, [&](int64_t begin, int64_t end) {
      if (x.scalar_type() == at::kFloat) {
        forward_f32(ptr<float>(x), ptr<float>(w), ptr<float>(b), ptr<float>(y), ptr<float>(mean),
                    ptr<float>(rstd), begin, end - begin, c, e);
      } else {
        std::vector<float> buf(static_cast<size_t>(2 * c));
        forward_bf16(ptr<uint16_t>(x), ptr<float>(w), ptr<float>(b), ptr<uint16_t>(y),
                     ptr<float>(mean), ptr<float>(rstd), buf.data(), begin, end - begin, c, e);
      }
    });
    ctx->save_for_backward({x, w, mean, rstd});
    ctx->saved_data["weight_dtype"] = static_cast<int64_t>(weight.scalar_type());
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &w = saved[1], &mean = saved[2], &rstd = saved[3];
    const auto weight_dtype = static_cast<at::ScalarType>(ctx->saved_data["weight_dtype"].toInt());
    const at::Tensor dy = grads[0].to(x.scalar_type()).contiguous();
    const int64_t c = x.size(-1), rows = x.numel() / c;
    at::Tensor dx = at::empty_like(x);
    // Per-chunk fp32 partial sums of the weight and bias gradients, reduced after the loop.
    const int64_t grain = 32, chunks = std::max<int64_t>(1, (rows + grain - 1) / grain);
    at::Tensor partial = at::zeros({chunks, 2, c}, x.options().dtype(at::kFloat));
    at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
      float* dw = ptr<float>(partial) + (begin / grain) * 2 * c;
      if (x.scalar_type() == at::kFloat) {
        backward_f32(ptr<float>(x), ptr<float>(dy), ptr<float>(w), ptr<float>(mean),
                     ptr<float>(rstd), ptr<float>(dx), dw, dw + c, begin, end - begin, c);
      } else {
        std::vector<float> buf(static_cast<size_t>(3 * c));
        backward_bf16(ptr<uint16_t>(x), ptr<uint16_t>(dy), ptr<float>(w), ptr<float>(mean),
                      ptr<float>(rstd), ptr<uint16_t>(dx), dw, dw + c, buf.data(), begin,
                      end - begin, c);
      }
    });
    const at::Tensor sums = partial.sum(0).to(weight_dtype);
    return {dx, sums[0], sums[1], at::Tensor()};
  }
};

}  // namespace

at::Tensor layer_norm(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                      double eps) {
  DS_CHECK(x.dim() >= 1 && weight.dim() == 1 && bias.dim() == 1 && weight.size(0) == x.size(-1) &&
               bias.size(0) == x.size(-1),
           Error, "layer_norm: weight and bias must be [C] for input [..., C], got ", x.sizes(),
           ", ", weight.sizes(), ", ", bias.sizes());
  if (!fused_supported(x) || !weight.device().is_cpu())
    return torch::layer_norm(x, {x.size(-1)}, weight, bias, eps);
  return LayerNorm::apply(x, weight, bias, eps);
}

}  // namespace deepshard::kernels
