// The GPT with fused kernels (model.fused_kernels, the default) against the unfused libtorch path:
// same loss and same parameter gradients within fp32 rounding, and in bf16 within bf16 rounding.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "deepshard/models/gpt.h"

namespace deepshard::models {
namespace fused_gpt_test {

struct LossAndGrads {
  double loss;
  std::vector<at::Tensor> grads;
};

LossAndGrads loss_and_grads(bool fused, at::ScalarType dtype) {
  GptConfig c;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_embd = 64;
  c.block_size = 32;
  c.fused_kernels = fused;
  Gpt model(c, 7);
  model->to(dtype);
  torch::manual_seed(3);
  const at::Tensor idx = torch::randint(0, 256, {3, 32}, at::kLong);
  const at::Tensor targets = torch::randint(0, 256, {3, 32}, at::kLong);
  const at::Tensor loss = model->loss(idx, targets);
  loss.backward();
  LossAndGrads out{loss.item<double>(), {}};
  for (const auto& p : model->parameters()) out.grads.push_back(p.grad().to(at::kDouble));
  return out;
}

void expect_same(at::ScalarType dtype, double loss_tol, double grad_rtol) {
  const auto fused = loss_and_grads(true, dtype), plain = loss_and_grads(false, dtype);
  EXPECT_NEAR(fused.loss, plain.loss, loss_tol);
  ASSERT_EQ(fused.grads.size(), plain.grads.size());
  for (size_t i = 0; i < fused.grads.size(); ++i) {
    const double scale = plain.grads[i].abs().max().item<double>();
    const double diff = (fused.grads[i] - plain.grads[i]).abs().max().item<double>();
    EXPECT_LE(diff, grad_rtol * scale + 1e-7) << "parameter " << i << " (scale " << scale << ")";
  }
}

TEST(FusedGpt, Fp32MatchesTheUnfusedPath) { expect_same(at::kFloat, 1e-5, 1e-4); }

TEST(FusedGpt, Bf16MatchesTheUnfusedPathWithinBf16Rounding) {
  expect_same(at::kBFloat16, 2e-2, 1e-1);
}

}  // namespace fused_gpt_test
}  // namespace deepshard::models
