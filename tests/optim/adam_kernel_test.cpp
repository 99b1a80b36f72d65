// The adam_step kernel variants (AVX-512, AVX2+FMA, scalar; the level forced with
// platform::force_kernel_isa): agreement of every vector variant with the scalar reference on
// lengths with and without vector tails, no writes past the end, and the fused bf16 copy against
// torch's own float -> bf16 conversion, bit for bit (ties, subnormals, overflow to inf; NaN as
// c10::BFloat16).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstring>
#include <vector>

#include "deepshard/util/error.h"
#include "optim/adam.h"
#include "optim/adam_test_helpers.h"
#include "support/kernel_isa_test.h"

namespace deepshard::optim {
namespace adam_kernel_test {

using platform::KernelIsa;
using test::rel_diff;
using testing::ScopedKernelIsa;
using testing::supported_kernel_isas;

// Lengths around the 8- and 16-lane vectors and the 65536-element thread tile.
const std::vector<int64_t> kLengths = {1,  5,  8,  9,    15,        16,
                                       17, 31, 33, 1000, 65536 + 3, 3 * 65536 + 77};

// One Adam state; `step` runs adam_step on all of it under the variant currently forced.
struct AdamState {
  at::Tensor param, exp_avg, exp_avg_sq;
  int64_t step_count = 0;

  explicit AdamState(const at::Tensor& init)
      : param(init.clone()), exp_avg(at::zeros_like(init)), exp_avg_sq(at::zeros_like(init)) {}

  void step(const at::Tensor& grad, const AdamHyper& hyper, double wd, float grad_scale,
            uint16_t* bf16_out = nullptr) {
    adam_step(param.data_ptr<float>(), grad.data_ptr<float>(), exp_avg.data_ptr<float>(),
              exp_avg_sq.data_ptr<float>(), param.numel(), hyper, wd, ++step_count, grad_scale,
              bf16_out);
  }
};

// The bf16 tensor's bit patterns as int16, so that NaNs compare too.
at::Tensor bits(const at::Tensor& bf16) { return bf16.view(at::kShort); }

// 10 steps with a changing lr, both decay modes, a gradient scale: every vector variant against the
// scalar reference, and nothing written past n.
TEST(AdamIsa, EveryVariantMatchesTheScalarReference) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(11);
  double worst = 0.0;
  for (const int64_t n : kLengths) {
    for (const bool decoupled : {true, false}) {
      AdamHyper hyper;
      hyper.beta2 = 0.95;
      hyper.decoupled = decoupled;
      // One spare element past n, which must stay untouched.
      const at::Tensor init = at::randn({n + 1}, gen);
      std::vector<at::Tensor> grads;
      for (int s = 0; s < 10; ++s) grads.push_back(at::randn({n + 1}, gen));

      auto run = [&](KernelIsa isa) {
        ScopedKernelIsa forced(isa);
        AdamState state(init);
        for (int s = 0; s < 10; ++s) {
          hyper.lr = 1e-3 * (1 + s);
          adam_step(state.param.data_ptr<float>(), grads[s].data_ptr<float>(),
                    state.exp_avg.data_ptr<float>(), state.exp_avg_sq.data_ptr<float>(), n, hyper,
                    0.1, ++state.step_count, 0.7f);
        }
        return state;
      };
      const AdamState ref = run(KernelIsa::kScalar);
      EXPECT_GT(rel_diff(ref.param.narrow(0, 0, n), init.narrow(0, 0, n)), 1e-4);
      for (KernelIsa isa : supported_kernel_isas()) {
        const AdamState got = run(isa);
        SCOPED_TRACE(detail::concat(to_string(isa), " n=", n, " decoupled=", decoupled));
        const double d =
            std::max({rel_diff(got.param, ref.param), rel_diff(got.exp_avg, ref.exp_avg),
                      rel_diff(got.exp_avg_sq, ref.exp_avg_sq)});
        EXPECT_LE(d, 1e-6);
        worst = std::max(worst, d);
        EXPECT_EQ(got.param[n].item<float>(), init[n].item<float>());
        EXPECT_EQ(got.exp_avg[n].item<float>(), 0.0f);
        EXPECT_EQ(got.exp_avg_sq[n].item<float>(), 0.0f);
      }
    }
  }
  ::testing::Test::RecordProperty("max_rel_diff_vs_scalar", detail::concat(worst));
}

// The fused copy equals param.to(kBFloat16) bit for bit after a normal step, on every length,
// and writes nothing past n.
TEST(AdamIsa, Bf16CopyEqualsTorchConversionAfterAStep) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(23);
  const uint16_t kSentinel = 0x1234;
  for (KernelIsa isa : supported_kernel_isas()) {
    ScopedKernelIsa forced(isa);
    for (const int64_t n : kLengths) {
      SCOPED_TRACE(detail::concat(to_string(isa), " n=", n));
      AdamState state(at::randn({n}, gen));
      std::vector<uint16_t> out(n + 1, kSentinel);
      state.step(at::randn({n}, gen), AdamHyper{}, 0.1, 1.0f, out.data());
      const at::Tensor copy = at::from_blob(out.data(), {n}, at::kBFloat16);
      EXPECT_TRUE(torch::equal(bits(copy), bits(state.param.to(at::kBFloat16))));
      EXPECT_EQ(out[n], kSentinel);
    }
  }
}

// Values chosen to exercise the rounding: with lr = 0, no decay and a zero gradient the update
// leaves finite parameters exactly as they are, so the copy sees these bit patterns.
TEST(AdamIsa, Bf16CopyRoundsAsTorchOnEdgeCases) {
  const std::vector<uint32_t> patterns = {
      0x3F800000, 0x3F808000,                          // tie, kept bit even: rounds down
      0x3F818000,                                      // tie, kept bit odd: rounds up
      0x3F808001, 0x3F807FFF,                          // just above / below the tie
      0x7F7FFFFF,                                      // largest float: rounds to +inf
      0xFF7FFFFF,                                      // and to -inf
      0x00000001, 0x00008000, 0x00018000, 0x807FFFFF,  // subnormals
      0x80000000, 0x00000000,                          // signed zeros
      0x7F800000, 0xFF800000,                          // infinities (become NaN through p + 0*p)
      0x7FC00001, 0xFFFFFFFF,                          // NaNs with payloads
  };
  std::vector<float> values;
  for (int copies = 0; copies < 3; ++copies) {  // 51 elements: full vectors and a tail
    for (uint32_t u : patterns) {
      float f;
      std::memcpy(&f, &u, sizeof f);
      values.push_back(f);
    }
  }
  const int64_t n = int64_t(values.size());
  const at::Tensor init = at::from_blob(values.data(), {n}, at::kFloat).clone();
  AdamHyper hyper;
  hyper.lr = 0.0;
  for (KernelIsa isa : supported_kernel_isas()) {
    SCOPED_TRACE(to_string(isa));
    ScopedKernelIsa forced(isa);
    AdamState state(init);
    std::vector<uint16_t> out(n);
    state.step(at::zeros({n}), hyper, 0.0, 1.0f, out.data());
    const at::Tensor finite = init.isfinite();
    EXPECT_TRUE(torch::equal(state.param.masked_select(finite).view(at::kInt),
                             init.masked_select(finite).view(at::kInt)))
        << "finite parameters changed";
    const at::Tensor copy = bits(at::from_blob(out.data(), {n}, at::kBFloat16));
    const at::Tensor expected = bits(state.param.to(at::kBFloat16));
    for (int64_t i = 0; i < n; ++i) {
      const float updated = state.param[i].item<float>();
      // NaN (the infinities too, through p + 0*p) is c10::BFloat16's 0x7FC0. torch 1.13's AVX2 and
      // AVX-512 copy kernels write 0xFFFF instead, its scalar kernel 0x7FC0: both are NaN.
      const int16_t want =
          updated != updated ? int16_t(c10::BFloat16(updated).x) : expected[i].item<int16_t>();
      EXPECT_EQ(copy[i].item<int16_t>(), want)
          << "element " << i << " float bits 0x" << std::hex << patterns[i % patterns.size()];
    }
    const int64_t nans = state.param.isnan().sum().item<int64_t>();
    EXPECT_EQ(nans, 3 * 4);  // the infinities and NaNs
    EXPECT_EQ(at::from_blob(out.data(), {n}, at::kBFloat16).isnan().sum().item<int64_t>(), nans);
  }
}

// FlatAdam's bf16 argument: ranges get the copy, padding gaps are not written.
TEST(FlatAdam, Bf16CopyCoversTheRangesOnly) {
  const config::OptimizerConfig c = test::adamw_config();
  const int64_t n = 1000;
  FlatAdam adam(c, n, {{0, 400, c.weight_decay}, {400, 300, 0.0}, {750, 250, c.weight_decay}});
  auto gen = at::make_generator<at::CPUGeneratorImpl>(29);
  at::Tensor param = at::randn({n}, gen);
  const at::Tensor sentinel = at::full({n}, 7.0, at::kBFloat16);
  at::Tensor copy = sentinel.clone();
  for (int step = 0; step < 3; ++step) adam.step(param, at::randn({n}, gen), c.lr, 1.0f, copy);
  for (auto [begin, end] : {std::pair{0, 700}, std::pair{750, 1000}}) {
    EXPECT_TRUE(torch::equal(bits(copy.slice(0, begin, end)),
                             bits(param.slice(0, begin, end).to(at::kBFloat16))));
  }
  EXPECT_TRUE(torch::equal(copy.slice(0, 700, 750), sentinel.slice(0, 700, 750)));
}

}  // namespace adam_kernel_test
}  // namespace deepshard::optim
