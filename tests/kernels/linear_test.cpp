// kernels::linear against torch::linear: forward and the three gradients in fp32 within 1e-5
// relative on the GPT's shapes (and odd ones), with and without bias, one and two threads; the
// bf16, non-contiguous and empty cases fall back to torch::linear and give its results.
#include "kernels/linear.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "kernels/expect_close.h"
#include "platform/sgemm.h"
#include "support/scoped_bf16_compute.h"

namespace deepshard::kernels {
namespace linear_test {

struct Result {
  at::Tensor y, dx, dw, db;
};

using LinearFn = std::function<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&)>;

Result run(const LinearFn& f, const at::Tensor& x0, const at::Tensor& w0, const at::Tensor& b0,
           const at::Tensor& dy) {
  const at::Tensor x = x0.detach().clone().requires_grad_(true);
  const at::Tensor w = w0.detach().clone().requires_grad_(true);
  const at::Tensor b = b0.defined() ? b0.detach().clone().requires_grad_(true) : at::Tensor();
  const at::Tensor y = f(x, w, b);
  std::vector<at::Tensor> inputs = {x, w};
  if (b.defined()) inputs.push_back(b);
  const auto g = torch::autograd::grad({y}, inputs, {dy});
  return {y.detach(), g[0], g[1], b.defined() ? g[2] : at::Tensor()};
}

void compare(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, double rtol,
             const std::string& what) {
  std::vector<int64_t> out_sizes = x.sizes().vec();
  out_sizes.back() = w.size(0);
  const at::Tensor dy = torch::randn(out_sizes).to(x.scalar_type());
  const auto ref = run([](const at::Tensor& a, const at::Tensor& c,
                          const at::Tensor& d) { return torch::linear(a, c, d); },
                       x, w, b, dy);
  const auto got = run(
      [](const at::Tensor& a, const at::Tensor& c, const at::Tensor& d) { return linear(a, c, d); },
      x, w, b, dy);
  ASSERT_EQ(got.y.scalar_type(), ref.y.scalar_type()) << what;
  expect_close(got.y, ref.y, 1e-12, rtol, what + " y");
  expect_close(got.dx, ref.dx, 1e-12, rtol, what + " dX");
  expect_close(got.dw, ref.dw, 1e-12, rtol, what + " dW");
  if (b.defined()) expect_close(got.db, ref.db, 1e-12, rtol, what + " db");
}

TEST(DnnlLinear, Fp32MatchesTorchLinearOnTheGptShapes) {
  torch::manual_seed(1);
  struct Shape {
    int64_t batch, t, in, out;
    bool bias;
  };
  // The peers' GPT (C 256) and `small` (C 384): qkv, proj, fc, proj and the head; odd sizes.
  const Shape shapes[] = {{8, 128, 256, 768, true},  {8, 128, 1024, 256, true},
                          {2, 256, 384, 1536, true}, {2, 256, 384, 256, false},
                          {3, 17, 33, 65, true},     {1, 1, 7, 5, false}};
  for (int threads : {1, 2}) {
    at::set_num_threads(threads);
    for (const auto& s : shapes) {
      const at::Tensor x = torch::randn({s.batch, s.t, s.in});
      const at::Tensor w = torch::randn({s.out, s.in}) * 0.02;
      const at::Tensor b = s.bias ? torch::randn({s.out}) : at::Tensor();
      ASSERT_EQ(fused_linear_supported(x, w, b), platform::sgemm_usable());
      compare(x, w, b, 1e-5,
              "fp32 [" + std::to_string(s.batch) + "," + std::to_string(s.t) + "," +
                  std::to_string(s.in) + "] x [" + std::to_string(s.out) + "]ᵀ, " +
                  std::to_string(threads) + " thread(s)");
    }
  }
  at::set_num_threads(1);
}

TEST(DnnlLinear, OnlyTheInputsThatNeedGradientsGetThem) {
  const at::Tensor x = torch::randn({4, 16});
  const at::Tensor w = torch::randn({8, 16}).requires_grad_(true);
  const at::Tensor b = torch::randn({8});  // no gradient
  const at::Tensor y = linear(x, w, b);
  y.sum().backward();
  ASSERT_TRUE(w.grad().defined());
  expect_close(w.grad(), torch::ones({4, 8}).t().mm(x), 1e-12, 1e-5, "dW");
  EXPECT_FALSE(x.requires_grad() && x.grad().defined());
}

TEST(DnnlLinear, OtherDtypesAndLayoutsFallBackToTorchLinear) {
  torch::manual_seed(2);
  const at::Tensor x = torch::randn({4, 24, 64});
  const at::Tensor w = torch::randn({96, 64}) * 0.05;
  const at::Tensor b = torch::randn({96});
  // bf16 with the native compute (the fp32 one is bf16_compute_test.cpp's): torch::linear's own
  // result (identical, since it is what runs).
  const testing::ScopedBf16Compute native(Bf16Compute::kNative);
  const at::Tensor xb = x.to(at::kBFloat16), wb = w.to(at::kBFloat16), bb = b.to(at::kBFloat16);
  EXPECT_FALSE(fused_linear_supported(xb, wb, bb));
  compare(xb, wb, bb, 0.0, "bf16");
  // Non-contiguous input (a transposed view) and weight (the transpose of a [in, out] tensor).
  const at::Tensor xt = torch::randn({4, 64, 24}).transpose(1, 2);
  const at::Tensor wt = (torch::randn({64, 96}) * 0.05).t();
  EXPECT_FALSE(fused_linear_supported(xt, w, b));
  EXPECT_FALSE(fused_linear_supported(x, wt, b));
  compare(xt, w, b, 1e-5, "non-contiguous x");
  compare(x, wt, b, 1e-5, "non-contiguous W");
  // fp64 and empty inputs.
  EXPECT_FALSE(fused_linear_supported(x.to(at::kDouble), w.to(at::kDouble), b.to(at::kDouble)));
  compare(x.to(at::kDouble), w.to(at::kDouble), b.to(at::kDouble), 0.0, "fp64");
  const at::Tensor empty = torch::randn({0, 64});
  EXPECT_FALSE(fused_linear_supported(empty, w, b));
  EXPECT_EQ(linear(empty, w, b).sizes(), (std::vector<int64_t>{0, 96}));
}

}  // namespace linear_test
}  // namespace deepshard::kernels
