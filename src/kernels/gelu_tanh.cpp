// The fused tanh-GELU (fused_ops.h): forward y = 0.5 x (1 + tanh(u)), u = k (x + a x^3), and
// backward dx = dy (0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 a x^2)), each one vectorised pass.
#include <torch/torch.h>

#include "kernels/fused_ops.h"
#include "kernels/simd.h"
#include "kernels/tensor_data.h"

namespace deepshard::kernels {
namespace {

using simd::bf16_to_float;
using simd::float_to_bf16;
using simd::tanh_fast;

constexpr float kK = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kA = 0.044715f;

DS_SIMD_INLINE float gelu(float x) {
  const float t = tanh_fast(kK * (x + kA * x * x * x));
  return 0.5f * x * (1.0f + t);
}

DS_SIMD_INLINE float gelu_grad(float x, float dy) {
  const float x2 = x * x;
  const float t = tanh_fast(kK * (x + kA * x2 * x));
  return dy * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kK * (1.0f + 3.0f * kA * x2));
}

DS_SIMD_KERNEL(forward_f32, (const float* x, float* y, int64_t n), (x, y, n)) {
  for (int64_t i = 0; i < n; ++i) y[i] = gelu(x[i]);
}
DS_SIMD_KERNEL(forward_bf16, (const uint16_t* x, uint16_t* y, int64_t n), (x, y, n)) {
  for (int64_t i = 0; i < n; ++i) y[i] = float_to_bf16(gelu(bf16_to_float(x[i])));
}
DS_SIMD_KERNEL(backward_f32, (const float* x, const float* dy, float* dx, int64_t n),
               (x, dy, dx, n)) {
  for (int64_t i = 0; i < n; ++i) dx[i] = gelu_grad(x[i], dy[i]);
}
DS_SIMD_KERNEL(backward_bf16, (const uint16_t* x, const uint16_t* dy, uint16_t* dx, int64_t n),
               (x, dy, dx, n)) {
  for (int64_t i = 0; i < n; ++i)
    dx[i] = float_to_bf16(gelu_grad(bf16_to_float(x[i]), bf16_to_float(dy[i])));
}

template <typename F32, typename BF16>
void for_chunks(const at::Tensor& like, F32 f32, BF16 bf16) {
  at::parallel_for(0, like.numel(), 1 << 14, [&](int64_t begin, int64_t end) {
    if (like.scalar_type() == at::kFloat) {
      f32(begin, end - begin);
    } else {
      bf16(begin, end - begin);
    }
  });
}

struct GeluTanh : torch::autograd::Function<GeluTanh> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& input) {
    const at::Tensor x = input.contiguous();
    at::Tensor y = at::empty_like(x);
    for_chunks(
        x, [&](int64_t i, int64_t n) { forward_f32(ptr<float>(x) + i, ptr<float>(y) + i, n); },
        [&](int64_t i, int64_t n) { forward_bf16(ptr<uint16_t>(x) + i, ptr<uint16_t>(y) + i, n); });
    ctx->save_for_backward({x});
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const at::Tensor x = ctx->get_saved_variables()[0];
    const at::Tensor dy = grads[0].to(x.scalar_type()).contiguous();
    at::Tensor dx = at::empty_like(x);
    for_chunks(
        x,
        [&](int64_t i, int64_t n) {
          backward_f32(ptr<float>(x) + i, ptr<float>(dy) + i, ptr<float>(dx) + i, n);
        },
        [&](int64_t i, int64_t n) {
          backward_bf16(ptr<uint16_t>(x) + i, ptr<uint16_t>(dy) + i, ptr<uint16_t>(dx) + i, n);
        });
    return {dx};
  }
};

}  // namespace

bool fused_supported(const at::Tensor& t) {
  return t.device().is_cpu() && t.layout() == at::kStrided &&
         (t.scalar_type() == at::kFloat || t.scalar_type() == at::kBFloat16);
}

at::Tensor gelu_tanh(const at::Tensor& x) {
  if (!fused_supported(x)) return torch::gelu(x, "tanh");
  return GeluTanh::apply(x);
}

}  // namespace deepshard::kernels
