// Each fused kernel against the libtorch sequence it replaces: forward and backward (gradients by
// autograd through both), fp32 within 1e-5, bf16 within bf16 rounding of the fp32 result on the
// same bf16 inputs; on shapes of the GPT model (odd sizes included, so vector tails are covered),
// on each kernel instruction-set level this CPU runs (platform/kernel_isa.h).
#include "kernels/fused_ops.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "kernels/expect_close.h"
#include "support/kernel_isa_test.h"

namespace deepshard::kernels {
namespace fused_ops_test {

// max |a - b| <= atol + rtol * max |b|
at::Tensor reference_causal_softmax(const at::Tensor& s, double scale) {
  const int64_t t = s.size(-1);
  const at::Tensor mask =
      torch::full({t, t}, -std::numeric_limits<double>::infinity(), s.options()).triu(1);
  return torch::softmax(s * scale + mask, -1);
}

// Output and input gradient of f(x) for upstream gradient dy.
std::pair<at::Tensor, at::Tensor> run(const std::function<at::Tensor(const at::Tensor&)>& f,
                                      const at::Tensor& x0, const at::Tensor& dy) {
  at::Tensor x = x0.detach().clone().requires_grad_(true);
  at::Tensor y = f(x);
  auto grads = torch::autograd::grad({y}, {x}, {dy.defined() ? dy : at::ones_like(y)});
  return {y.detach(), grads[0]};
}

void compare(const std::function<at::Tensor(const at::Tensor&)>& fused,
             const std::function<at::Tensor(const at::Tensor&)>& reference, const at::Tensor& x,
             const at::Tensor& dy, const std::string& what,
             at::ScalarType bf16_output = at::kBFloat16) {
  const auto [y_ref, dx_ref] = run(reference, x, dy);
  const auto [y, dx] = run(fused, x, dy);
  expect_close(y, y_ref, 1e-5, 1e-5, what + " fp32 forward");
  expect_close(dx, dx_ref, 1e-5, 1e-5, what + " fp32 backward");
  // bf16: the fused kernel computes in fp32 and rounds once; compare with the fp32 reference on
  // the same bf16 values (bf16 has 8 significant bits: 2^-8 relative).
  const at::Tensor xb = x.to(at::kBFloat16), dyb = dy.defined() ? dy.to(at::kBFloat16) : dy;
  const auto [yb_ref, dxb_ref] =
      run(reference, xb.to(at::kFloat), dyb.defined() ? dyb.to(at::kFloat) : dyb);
  const auto [yb, dxb] = run(fused, xb, dyb);
  EXPECT_EQ(yb.scalar_type(), bf16_output) << what;
  EXPECT_EQ(dxb.scalar_type(), at::kBFloat16) << what;
  expect_close(yb, yb_ref, 1e-6, 8e-3, what + " bf16 forward");
  expect_close(dxb, dxb_ref, 1e-6, 8e-3, what + " bf16 backward");
}

// Each level this CPU runs (the others are skipped), forced for the test.
class FusedOpsIsa : public testing::EachKernelIsa {};

TEST_P(FusedOpsIsa, GeluTanhMatchesTorch) {
  torch::manual_seed(1);
  for (int64_t n : {1, 17, 1000, 8 * 128 * 1024 + 3}) {
    const at::Tensor x = torch::randn({n}) * 3;
    compare(
        gelu_tanh, [](const at::Tensor& v) { return torch::gelu(v, "tanh"); }, x, torch::randn({n}),
        "gelu n=" + std::to_string(n));
  }
  // Saturation: large |x| (tanh = ±1) and tiny x.
  const at::Tensor x = torch::tensor({-30.f, -9.f, -1e-6f, 0.f, 1e-6f, 9.f, 30.f});
  compare(
      gelu_tanh, [](const at::Tensor& v) { return torch::gelu(v, "tanh"); }, x, torch::ones({7}),
      "gelu extremes");
}

TEST_P(FusedOpsIsa, CausalSoftmaxMatchesTorch) {
  torch::manual_seed(2);
  for (auto shape : {std::vector<int64_t>{2, 3, 5, 5}, {8, 4, 128, 128}, {1, 1, 33, 33}}) {
    const double scale = 1.0 / std::sqrt(64.0);
    const at::Tensor s = torch::randn(shape) * 8;
    compare([&](const at::Tensor& v) { return causal_softmax(v, scale); },
            [&](const at::Tensor& v) { return reference_causal_softmax(v, scale); }, s,
            torch::randn(shape), "causal softmax T=" + std::to_string(shape.back()));
  }
}

TEST_P(FusedOpsIsa, CrossEntropyMatchesTorch) {
  torch::manual_seed(3);
  for (auto [n, v] : {std::pair<int64_t, int64_t>{1, 7}, {1024, 256}, {37, 50257}}) {
    const at::Tensor logits = torch::randn({n, v}) * 4;
    const at::Tensor targets = torch::randint(0, v, {n}, at::kLong);
    auto fused = [&](const at::Tensor& x) { return cross_entropy(x, targets); };
    auto reference = [&](const at::Tensor& x) {
      return torch::nn::functional::cross_entropy(x.to(at::kFloat), targets);
    };
    compare(fused, reference, logits, torch::full({}, 0.7), "cross-entropy V=" + std::to_string(v),
            /*bf16_output=*/at::kFloat);  // the loss is fp32 whatever the logits' dtype
  }
}

// y, dx, dweight, dbias of a layer norm.
std::vector<at::Tensor> layer_norm_run(bool fused, const at::Tensor& x0, const at::Tensor& w0,
                                       const at::Tensor& b0, const at::Tensor& dy) {
  at::Tensor x = x0.detach().clone().requires_grad_(true);
  at::Tensor w = w0.detach().clone().requires_grad_(true);
  at::Tensor b = b0.detach().clone().requires_grad_(true);
  at::Tensor y = fused ? layer_norm(x, w, b, 1e-5) : torch::layer_norm(x, {x.size(-1)}, w, b, 1e-5);
  auto g = torch::autograd::grad({y}, {x, w, b}, {dy});
  return {y.detach(), g[0], g[1], g[2]};
}

TEST_P(FusedOpsIsa, LayerNormMatchesTorch) {
  torch::manual_seed(4);
  const char* names[] = {"y", "dx", "dweight", "dbias"};
  for (auto shape : {std::vector<int64_t>{3, 7}, {8, 128, 256}, {2, 5, 384}, {1000, 33}}) {
    const int64_t c = shape.back();
    const at::Tensor x = torch::randn(shape) * 2 + 0.5, dy = torch::randn(shape);
    const at::Tensor w = torch::randn({c}), b = torch::randn({c});
    const auto ref = layer_norm_run(false, x, w, b, dy), got = layer_norm_run(true, x, w, b, dy);
    for (int i = 0; i < 4; ++i)
      expect_close(got[i], ref[i], 1e-5, 1e-5,
                   std::string("layer norm fp32 ") + names[i] + " C=" + std::to_string(c));
    auto bf = [](const at::Tensor& t) { return t.to(at::kBFloat16); };
    auto fp = [](const at::Tensor& t) { return t.to(at::kBFloat16).to(at::kFloat); };
    const auto ref_b = layer_norm_run(false, fp(x), fp(w), fp(b), fp(dy));
    const auto got_b = layer_norm_run(true, bf(x), bf(w), bf(b), bf(dy));
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(got_b[i].scalar_type(), at::kBFloat16) << names[i];
      expect_close(got_b[i], ref_b[i], 1e-6, 8e-3,
                   std::string("layer norm bf16 ") + names[i] + " C=" + std::to_string(c));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, FusedOpsIsa, testing::kAllKernelIsas, testing::KernelIsaName);

TEST(FusedOps, OtherDtypesFallBackToTorch) {
  const at::Tensor x = torch::randn({64}, at::kDouble);
  EXPECT_FALSE(fused_supported(x));
  EXPECT_TRUE(torch::allclose(gelu_tanh(x), torch::gelu(x, "tanh")));
}

TEST(FusedOps, ATargetOutsideTheVocabularyIsAnError) {
  EXPECT_THROW(cross_entropy(torch::randn({2, 4}), torch::tensor({1, 4}, at::kLong)),
               std::exception);
}

}  // namespace fused_ops_test
}  // namespace deepshard::kernels
