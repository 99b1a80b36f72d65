// The blocked causal attention (causal_attention.h). Per (batch, head), with q, k, v, dq, dk, dv
// read and written in place inside qkv / dqkv ([T, 3C] rows, leading dimension 3C) and y / dy
// ([T, C] rows): forward, for each query block [s, e): P[s:e, 0:e] = q[s:e] k[0:e]ᵀ, then the
// scaled causal softmax of those rows in place, then y[s:e] = P[s:e, 0:e] v[0:e]. Backward: per
// query block dP[s:e, 0:e] = dy[s:e] v[0:e]ᵀ, dS = softmax'(P, dP) in place, dq[s:e] = dS[s:e, 0:e]
// k[0:e]; then per key block [s, e): dv[s:e] = P[s:T, s:e]ᵀ dy[s:T] and dk[s:e] = dS[s:T, s:e]ᵀ
// q[s:T] (rows above s of those columns are masked zeros), so every output is written once,
// unaccumulated.
#include "kernels/causal_attention.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <cmath>
#include <vector>

#include "deepshard/util/error.h"
#include "kernels/bf16_compute.h"
#include "kernels/causal_softmax_rows.h"
#include "kernels/gemm_threads.h"
#include "kernels/record_op.h"
#include "platform/sgemm.h"

namespace deepshard::kernels {
namespace {

// Query/key block: small enough to skip most of the masked half, large enough that each product
// stays an efficient sgemm.
constexpr int64_t kBlock = 64;

// Row-major C[m, n] = op(A) op(B) (beta 0) with explicit leading dimensions.
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
          const float* b, int64_t ldb, float* c, int64_t ldc) {
  platform::sgemm_row_major(ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
}

struct Shape {
  int64_t batch, seq, width, heads, head_dim;
  int64_t ld_qkv() const { return 3 * width; }
};

Shape shape_of(const at::Tensor& qkv, int64_t n_head) {
  const int64_t width = qkv.size(2) / 3;
  return {qkv.size(0), qkv.size(1), width, n_head, width / n_head};
}

// Runs f(b, h) for every (batch, head) pair on torch's intra-op threads; the sgemm runs on one
// thread inside (gemm_threads.h) or on torch's thread count when the loop runs inline.
template <typename F>
void for_each_head(const Shape& sh, F&& f) {
  match_gemm_threads_to_torch();
  const OneThreadBlas one_thread(at::get_num_threads() > 1 && sh.batch * sh.heads > 1);
  at::parallel_for(0, sh.batch * sh.heads, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) f(i / sh.heads, i % sh.heads);
  });
}

at::Tensor attention_forward(torch::autograd::AutogradContext* ctx, const at::Tensor& qkv,
                             int64_t n_head) {
  const Shape sh = shape_of(qkv, n_head);
  const int64_t t = sh.seq, ld = sh.ld_qkv();
  const float scale = static_cast<float>(1.0 / std::sqrt(double(sh.head_dim)));
  at::Tensor probs = at::empty({sh.batch, sh.heads, t, t}, qkv.options());
  at::Tensor y = at::empty({sh.batch, t, sh.width}, qkv.options());
  const float* base = qkv.data_ptr<float>();
  float* p_all = probs.data_ptr<float>();
  float* y_all = y.data_ptr<float>();
  for_each_head(sh, [&](int64_t b, int64_t h) {
    const float* q = base + b * t * ld + h * sh.head_dim;
    const float* k = q + sh.width;
    const float* v = q + 2 * sh.width;
    float* p = p_all + (b * sh.heads + h) * t * t;
    float* out = y_all + b * t * sh.width + h * sh.head_dim;
    for (int64_t s = 0; s < t; s += kBlock) {
      const int64_t e = std::min(t, s + kBlock);
      gemm(false, true, e - s, e, sh.head_dim, q + s * ld, ld, k, ld, p + s * t, t);
      detail::causal_softmax_rows_f32(p, p, s, e - s, t, t, scale);
      gemm(false, false, e - s, sh.head_dim, e, p + s * t, t, v, ld, out + s * sh.width, sh.width);
    }
  });
  ctx->save_for_backward({qkv, probs});
  ctx->saved_data["n_head"] = n_head;
  return y;
}

at::Tensor attention_backward(torch::autograd::AutogradContext* ctx, const at::Tensor& grad) {
  const auto saved = ctx->get_saved_variables();
  const at::Tensor& qkv = saved[0];
  const at::Tensor& probs = saved[1];
  const Shape sh = shape_of(qkv, ctx->saved_data["n_head"].toInt());
  const int64_t t = sh.seq, ld = sh.ld_qkv();
  const float scale = static_cast<float>(1.0 / std::sqrt(double(sh.head_dim)));
  const at::Tensor dy_all = grad.to(at::kFloat).contiguous();
  at::Tensor dqkv = at::empty_like(qkv);
  const float* base = qkv.data_ptr<float>();
  const float* p_all = probs.data_ptr<float>();
  const float* dy_base = dy_all.data_ptr<float>();
  float* d_base = dqkv.data_ptr<float>();
  for_each_head(sh, [&](int64_t b, int64_t h) {
    thread_local std::vector<float> ds_buffer;  // dP, then dS, of this head: [T, T]
    ds_buffer.resize(static_cast<size_t>(t * t));
    float* ds = ds_buffer.data();
    const int64_t offset = b * t * ld + h * sh.head_dim;
    const float *q = base + offset, *k = q + sh.width, *v = q + 2 * sh.width;
    float *dq = d_base + offset, *dk = dq + sh.width, *dv = dq + 2 * sh.width;
    const float* p = p_all + (b * sh.heads + h) * t * t;
    const float* dy = dy_base + b * t * sh.width + h * sh.head_dim;
    for (int64_t s = 0; s < t; s += kBlock) {  // query blocks
      const int64_t e = std::min(t, s + kBlock);
      gemm(false, true, e - s, e, sh.head_dim, dy + s * sh.width, sh.width, v, ld, ds + s * t, t);
      detail::causal_softmax_grad_rows_f32(p, ds, ds, s, e - s, t, t, scale);
      gemm(false, false, e - s, sh.head_dim, e, ds + s * t, t, k, ld, dq + s * ld, ld);
    }
    for (int64_t s = 0; s < t; s += kBlock) {  // key blocks: rows s..T of columns s..e
      const int64_t e = std::min(t, s + kBlock);
      gemm(true, false, e - s, sh.head_dim, t - s, p + s * t + s, t, dy + s * sh.width, sh.width,
           dv + s * ld, ld);
      gemm(true, false, e - s, sh.head_dim, t - s, ds + s * t + s, t, q + s * ld, ld, dk + s * ld,
           ld);
    }
  });
  return dqkv;
}

struct BlockedCausalAttention : torch::autograd::Function<BlockedCausalAttention> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& qkv,
                            int64_t n_head) {
    return attention_forward(ctx, qkv, n_head);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    return {attention_backward(ctx, grads[0]), at::Tensor()};
  }
};

}  // namespace

bool blocked_attention_supported(const at::Tensor& qkv, int64_t n_head) {
  const bool dtype = qkv.scalar_type() == at::kFloat ||
                     (qkv.scalar_type() == at::kBFloat16 && bf16_compute() == Bf16Compute::kFp32);
  return qkv.device().is_cpu() && qkv.layout() == at::kStrided && dtype && qkv.dim() == 3 &&
         qkv.is_contiguous() && n_head > 0 && qkv.size(2) % (3 * n_head) == 0 && qkv.numel() > 0 &&
         platform::sgemm_usable();
}

at::Tensor causal_attention(const at::Tensor& qkv, int64_t n_head) {
  DS_CHECK(
      blocked_attention_supported(qkv, n_head), Error,
      "causal_attention: needs contiguous fp32 CPU qkv [B, T, 3C] (or bf16 computed in fp32) with "
      "C a multiple of n_head (",
      n_head, ") and a verified sgemm; got ", qkv.sizes(), " ", qkv.scalar_type());
  // bf16 computed in fp32 (bf16_compute.h): the kernel on an fp32 copy of qkv, y rounded to bf16
  // once; autograd converts the gradient back to bf16 for qkv.
  if (qkv.scalar_type() == at::kBFloat16) {
    return causal_attention(qkv.to(at::kFloat), n_head).to(at::kBFloat16);
  }
  // Named for the flops profiler (profiling/op_flops.cpp counts the full products, as unfused).
  return record_op("deepshard::causal_attention", {qkv, n_head},
                   [&] { return BlockedCausalAttention::apply(qkv, n_head); });
}

}  // namespace deepshard::kernels
