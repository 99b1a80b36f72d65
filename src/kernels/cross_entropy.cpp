// The fused cross-entropy (fused_ops.h): per row of logits one pass for the max and one for the
// log-sum-exp (in fp32 whatever the logits' dtype: no fp32 copy of the logits is made), the mean
// loss accumulated in double; backward writes dlogits = g/N (softmax - onehot(target)) directly in
// the logits' dtype, from the saved logits and log-sum-exps.
#include <torch/torch.h>

#include "deepshard/util/error.h"
#include "kernels/fused_ops.h"
#include "kernels/simd.h"
#include "kernels/tensor_data.h"

namespace deepshard::kernels {
namespace {

using simd::bf16_to_float;
using simd::exp_nonpositive;
using simd::float_to_bf16;

DS_SIMD_INLINE float log_sum_exp(const float* x, int64_t v) {
  float max = -3.402823466e38f;
  for (int64_t j = 0; j < v; ++j) max = x[j] > max ? x[j] : max;
  float sum = 0.0f;
  for (int64_t j = 0; j < v; ++j) sum += exp_nonpositive(x[j] - max);
  return max + std::log(sum);
}

DS_SIMD_KERNEL(forward_f32, (const float* x, float* lse, int64_t row0, int64_t rows, int64_t v),
               (x, lse, row0, rows, v)) {
  for (int64_t r = row0; r < row0 + rows; ++r) lse[r] = log_sum_exp(x + r * v, v);
}
DS_SIMD_KERNEL(forward_bf16,
               (const uint16_t* x, float* lse, float* buf, int64_t row0, int64_t rows, int64_t v),
               (x, lse, buf, row0, rows, v)) {
  for (int64_t r = row0; r < row0 + rows; ++r) {
    for (int64_t j = 0; j < v; ++j) buf[j] = bf16_to_float(x[r * v + j]);
    lse[r] = log_sum_exp(buf, v);
  }
}
DS_SIMD_KERNEL(backward_f32,
               (const float* x, const float* lse, const int64_t* target, float* dx, int64_t row0,
                int64_t rows, int64_t v, float g),
               (x, lse, target, dx, row0, rows, v, g)) {
  for (int64_t r = row0; r < row0 + rows; ++r) {
    const float* xr = x + r * v;
    float* dr = dx + r * v;
    for (int64_t j = 0; j < v; ++j) dr[j] = g * exp_nonpositive(xr[j] - lse[r]);
    dr[target[r]] -= g;
  }
}
DS_SIMD_KERNEL(backward_bf16,
               (const uint16_t* x, const float* lse, const int64_t* target, uint16_t* dx,
                int64_t row0, int64_t rows, int64_t v, float g),
               (x, lse, target, dx, row0, rows, v, g)) {
  for (int64_t r = row0; r < row0 + rows; ++r) {
    const uint16_t* xr = x + r * v;
    const int64_t t = target[r];
    for (int64_t j = 0; j < v; ++j) {
      const float p = exp_nonpositive(bf16_to_float(xr[j]) - lse[r]);
      dx[r * v + j] = float_to_bf16(g * (p - (j == t ? 1.0f : 0.0f)));
    }
  }
}

struct CrossEntropy : torch::autograd::Function<CrossEntropy> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& logits,
                            const at::Tensor& targets) {
    const at::Tensor x = logits.contiguous(), t = targets.contiguous();
    const int64_t n = x.size(0), v = x.size(1);
    at::Tensor lse = at::empty({n}, x.options().dtype(at::kFloat));
    at::parallel_for(0, n, 16, [&](int64_t begin, int64_t end) {
      if (x.scalar_type() == at::kFloat) {
        forward_f32(ptr<float>(x), ptr<float>(lse), begin, end - begin, v);
      } else {
        std::vector<float> buf(static_cast<size_t>(v));
        forward_bf16(ptr<uint16_t>(x), ptr<float>(lse), buf.data(), begin, end - begin, v);
      }
    });
    // loss = mean(lse - x[target]) in double; targets are checked here (once, on the host).
    double sum = 0.0;
    const int64_t* tp = t.data_ptr<int64_t>();
    const float* lp = ptr<float>(lse);
    for (int64_t r = 0; r < n; ++r) {
      DS_CHECK(tp[r] >= 0 && tp[r] < v, Error, "cross_entropy: target ", tp[r], " of row ", r,
               " is outside [0, ", v, ")");
      const float xt = x.scalar_type() == at::kFloat
                           ? ptr<float>(x)[r * v + tp[r]]
                           : bf16_to_float(ptr<uint16_t>(x)[r * v + tp[r]]);
      sum += double(lp[r]) - double(xt);
    }
    ctx->save_for_backward({x, t, lse});
    return at::scalar_tensor(sum / double(n), x.options().dtype(at::kFloat));
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &t = saved[1], &lse = saved[2];
    const int64_t n = x.size(0), v = x.size(1);
    const float g = grads[0].item<float>() / static_cast<float>(n);
    at::Tensor dx = at::empty_like(x);
    at::parallel_for(0, n, 16, [&](int64_t begin, int64_t end) {
      if (x.scalar_type() == at::kFloat) {
        backward_f32(ptr<float>(x), ptr<float>(lse), t.data_ptr<int64_t>(), ptr<float>(dx), begin,
                     end - begin, v, g);
      } else {
        backward_bf16(ptr<uint16_t>(x), ptr<float>(lse), t.data_ptr<int64_t>(), ptr<uint16_t>(dx),
                      begin, end - begin, v, g);
      }
    });
    return {dx, at::Tensor()};
  }
};

}  // namespace

at::Tensor cross_entropy(const at::Tensor& logits, const at::Tensor& targets) {
  DS_CHECK(logits.dim() == 2 && targets.dim() == 1 && targets.size(0) == logits.size(0) &&
               targets.scalar_type() == at::kLong,
           Error, "cross_entropy: expected logits [N, V] and int64 targets [N], got ",
           logits.sizes(), " and ", targets.sizes(), " ", targets.scalar_type());
  if (!fused_supported(logits) || !targets.device().is_cpu())
    return torch::nn::functional::cross_entropy(logits.to(at::kFloat), targets);
  return CrossEntropy::apply(logits, targets);
}

}  // namespace deepshard::kernels
