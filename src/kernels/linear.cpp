// The fused linear (linear.h): forward y = x Wᵀ (+ b, written first and accumulated with beta 1),
// backward dX = dY W, dW = dYᵀ X, db = column sums of dY; x is viewed as [rows, in]. bf16 operands
// (bf16 computed in fp32) are converted to fp32 copies at each product, and results rounded once.
#include "kernels/linear.h"

#include <torch/torch.h>

#include "kernels/bf16_compute.h"
#include "kernels/gemm_threads.h"
#include "kernels/record_op.h"
#include "platform/sgemm.h"

namespace deepshard::kernels {
namespace {

bool dense_cpu(const at::Tensor& t, at::ScalarType dtype) {
  return t.device().is_cpu() && t.layout() == at::kStrided && t.scalar_type() == dtype &&
         t.is_contiguous() && !t.is_neg() && !t.is_conj();
}

// x, weight and bias (if defined) all dense CPU tensors of `dtype`, of matching shapes.
bool dense_operands(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                    at::ScalarType dtype) {
  if (!dense_cpu(x, dtype) || !dense_cpu(weight, dtype) || weight.dim() != 2 || x.dim() < 1 ||
      x.size(-1) != weight.size(1) || x.numel() == 0 || weight.numel() == 0)
    return false;
  return !bias.defined() ||
         (dense_cpu(bias, dtype) && bias.dim() == 1 && bias.size(0) == weight.size(0));
}

// The operand in fp32: itself when it is fp32, else an fp32 copy (bf16 computed in fp32).
at::Tensor as_fp32(const at::Tensor& t) { return t.to(at::kFloat).contiguous(); }

// Row-major C [m, n] = op(A) op(B) (+ C when accumulate) on torch's intra-op thread count.
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const at::Tensor& a,
          const at::Tensor& b, at::Tensor& c, bool accumulate) {
  match_gemm_threads_to_torch();
  platform::sgemm_row_major(ta, tb, m, n, k, 1.0f, a.data_ptr<float>(), ta ? m : k,
                            b.data_ptr<float>(), tb ? k : n, accumulate ? 1.0f : 0.0f,
                            c.data_ptr<float>(), n);
}

at::Tensor linear_forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                          const at::Tensor& weight, const at::Tensor& bias) {
  const int64_t in = weight.size(1), out = weight.size(0), rows = x.numel() / in;
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes.back() = out;
  at::Tensor y = at::empty(sizes, x.options().dtype(at::kFloat));
  at::Tensor y2 = y.view({rows, out});
  if (bias.defined()) y2.copy_(bias.expand({rows, out}));
  gemm(false, true, rows, out, in, as_fp32(x), as_fp32(weight), y2, bias.defined());
  ctx->save_for_backward({x, weight});  // in their own dtype: bf16 stays bf16 until backward
  return y.to(x.scalar_type());
}

// {dX, dW, db} (db only when `bias`), each only when its input needs it.
torch::autograd::variable_list linear_backward(torch::autograd::AutogradContext* ctx,
                                               const at::Tensor& grad, bool bias) {
  const auto saved = ctx->get_saved_variables();
  const at::Tensor& x = saved[0];
  const at::Tensor& weight = saved[1];
  const int64_t in = weight.size(1), out = weight.size(0), rows = x.numel() / in;
  const at::Tensor dy = grad.to(at::kFloat).contiguous().view({rows, out});
  torch::autograd::variable_list grads(bias ? 3 : 2);
  if (ctx->needs_input_grad(0)) {
    at::Tensor dx = at::empty({rows, in}, dy.options());
    gemm(false, false, rows, in, out, dy, as_fp32(weight), dx, false);
    grads[0] = dx.view(x.sizes()).to(x.scalar_type());
  }
  if (ctx->needs_input_grad(1)) {
    at::Tensor dw = at::empty({out, in}, dy.options());
    gemm(true, false, out, in, rows, dy, as_fp32(x).view({rows, in}), dw, false);
    grads[1] = dw.to(weight.scalar_type());
  }
  if (bias && ctx->needs_input_grad(2)) grads[2] = dy.sum(0).to(weight.scalar_type());
  return grads;
}

// Two autograd functions: libtorch 1.13's Function::apply rejects an undefined tensor input.
struct FusedLinear : torch::autograd::Function<FusedLinear> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& weight, const at::Tensor& bias) {
    return linear_forward(ctx, x, weight, bias);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    return linear_backward(ctx, grads[0], true);
  }
};

struct FusedLinearNoBias : torch::autograd::Function<FusedLinearNoBias> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& weight) {
    return linear_forward(ctx, x, weight, at::Tensor());
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    return linear_backward(ctx, grads[0], false);
  }
};

}  // namespace

bool fused_linear_supported(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  const bool operands =
      dense_operands(x, weight, bias, at::kFloat) ||
      (bf16_compute() == Bf16Compute::kFp32 && dense_operands(x, weight, bias, at::kBFloat16));
  return operands && platform::sgemm_usable();
}

at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  if (!fused_linear_supported(x, weight, bias)) {
    // bf16 computed in fp32 without a verified sgemm: libtorch's fp32
    // matmul on fp32 copies (autograd keeps the copies until backward).
    if (bf16_compute() == Bf16Compute::kFp32 && dense_operands(x, weight, bias, at::kBFloat16)) {
      return torch::linear(x.to(at::kFloat), weight.to(at::kFloat),
                           bias.defined() ? bias.to(at::kFloat) : bias)
          .to(at::kBFloat16);
    }
    return torch::linear(x, weight, bias);
  }
  // Named for the flops profiler (profiling/op_flops.cpp counts it as aten::linear).
  return record_op("deepshard::linear", {x, weight, bias}, [&] {
    return bias.defined() ? FusedLinear::apply(x, weight, bias)
                          : FusedLinearNoBias::apply(x, weight);
  });
}

}  // namespace deepshard::kernels
