// kernels::causal_attention (the blocked fp32 kernel) against the libtorch sequence it replaces
// (matmul, scale, causal mask, softmax, matmul): the output and the gradient of qkv within 1e-5
// relative, on the GPT presets' attention shapes, on sequence lengths that are not a multiple of
// the 64-row block or are shorter than one, with one and two threads, on each kernel
// instruction-set level this CPU runs (its softmax rows are a fused kernel); and what it refuses.
#include "kernels/causal_attention.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "deepshard/util/error.h"
#include "kernels/expect_close.h"
#include "platform/sgemm.h"
#include "support/kernel_isa_test.h"
#include "support/scoped_bf16_compute.h"

namespace deepshard::kernels {
namespace causal_attention_test {

at::Tensor reference_attention(const at::Tensor& qkv, int64_t n_head) {
  const int64_t batch = qkv.size(0), seq = qkv.size(1), width = qkv.size(2) / 3;
  const auto parts = qkv.split(width, /*dim=*/2);
  auto heads = [&](const at::Tensor& x) {
    return x.view({batch, seq, n_head, width / n_head}).transpose(1, 2);
  };
  const at::Tensor mask =
      torch::full({seq, seq}, -std::numeric_limits<double>::infinity(), qkv.options()).triu(1);
  const at::Tensor scores = torch::matmul(heads(parts[0]), heads(parts[1]).transpose(-2, -1));
  const at::Tensor att =
      torch::softmax(scores / std::sqrt(double(width / n_head)) + mask, /*dim=*/-1);
  return torch::matmul(att, heads(parts[2])).transpose(1, 2).contiguous().view({batch, seq, width});
}

// Output and d qkv of `f` for upstream gradient dy.
std::pair<at::Tensor, at::Tensor> run(at::Tensor (*f)(const at::Tensor&, int64_t),
                                      const at::Tensor& qkv0, int64_t n_head,
                                      const at::Tensor& dy) {
  const at::Tensor qkv = qkv0.detach().clone().requires_grad_(true);
  const at::Tensor y = f(qkv, n_head);
  const auto g = torch::autograd::grad({y}, {qkv}, {dy});
  return {y.detach(), g[0]};
}

void compare(int64_t batch, int64_t seq, int64_t width, int64_t n_head) {
  const std::string what = "B " + std::to_string(batch) + " T " + std::to_string(seq) + " C " +
                           std::to_string(width) + " heads " + std::to_string(n_head) +
                           " threads " + std::to_string(at::get_num_threads());
  const at::Tensor qkv = torch::randn({batch, seq, 3 * width});
  ASSERT_TRUE(blocked_attention_supported(qkv, n_head)) << what;
  const at::Tensor dy = torch::randn({batch, seq, width});
  const auto ref = run(&reference_attention, qkv, n_head, dy);
  const auto got = run(&causal_attention, qkv, n_head, dy);
  expect_close(got.first, ref.first, 1e-12, 1e-5, what + " y");
  expect_close(got.second, ref.second, 1e-12, 1e-5, what + " d qkv");
}

class BlockedAttention : public testing::EachKernelIsa {
 protected:
  void SetUp() override {
    if (!platform::sgemm_usable()) GTEST_SKIP() << platform::sgemm_status();
    testing::EachKernelIsa::SetUp();
    threads_ = at::get_num_threads();
    torch::manual_seed(7);
  }
  void TearDown() override {
    at::set_num_threads(threads_);
    testing::EachKernelIsa::TearDown();
  }
  int threads_ = 1;
};

TEST_P(BlockedAttention, MatchesLibtorchOnTheGptShapes) {
  for (int threads : {1, 2}) {
    at::set_num_threads(threads);
    compare(2, 256, 384, 6);  // `small`
    compare(2, 128, 256, 4);  // the peers' model
    compare(1, 64, 64, 2);    // `tiny`
  }
}

TEST_P(BlockedAttention, MatchesLibtorchOnPartialAndShortBlocks) {
  for (int threads : {1, 2}) {
    at::set_num_threads(threads);
    compare(3, 130, 96, 3);  // blocks of 64, 64, 2 rows
    compare(2, 100, 32, 4);  // head size 8
    compare(2, 5, 48, 2);    // shorter than one block
    compare(1, 1, 24, 3);    // one position: each query sees itself only
  }
}

TEST_P(BlockedAttention, RefusesWhatItDoesNotHandle) {
  // bf16 with the native compute (bf16 computed in fp32 runs this kernel on an fp32 copy:
  // bf16_compute_test.cpp).
  const testing::ScopedBf16Compute native(Bf16Compute::kNative);
  const at::Tensor qkv = torch::randn({2, 16, 3 * 32});
  EXPECT_FALSE(blocked_attention_supported(qkv.to(at::kBFloat16), 4));
  EXPECT_FALSE(blocked_attention_supported(qkv.transpose(0, 1), 4));  // not contiguous
  EXPECT_FALSE(blocked_attention_supported(qkv, 5));                  // 32 not a multiple of 5
  EXPECT_FALSE(blocked_attention_supported(qkv.view({32, 96}), 4));   // not [B, T, 3C]
  EXPECT_THROW(causal_attention(qkv.to(at::kBFloat16), 4), Error);
}

INSTANTIATE_TEST_SUITE_P(Isas, BlockedAttention, testing::kAllKernelIsas, testing::KernelIsaName);

}  // namespace causal_attention_test
}  // namespace deepshard::kernels
