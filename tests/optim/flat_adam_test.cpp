// FlatAdam and the adam_step kernel against libtorch's own Adam/AdamW (every kernel variant),
// DeepSpeed's per-element formula, per-range weight decay, padding gaps, the gradient scale,
// threading and the bf16 copy argument.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <type_traits>
#include <vector>

#include "deepshard/util/error.h"
#include "optim/adam.h"
#include "optim/adam_test_helpers.h"
#include "support/kernel_isa_test.h"

namespace deepshard::optim {
namespace flat_adam_test {

using test::adamw_config;
using test::rel_diff;

double lr_at(int step) { return 1e-3 * (1.0 + 0.1 * step); }  // lr changes every step

// The reference optimizer's per-parameter state (AdamW's is not an AdamParamState: casting it to
// one is undefined behaviour, which UBSan's vptr check reports).
template <typename TorchOptimizer>
using TorchState = std::conditional_t<std::is_same_v<TorchOptimizer, torch::optim::AdamW>,
                                      torch::optim::AdamWParamState, torch::optim::AdamParamState>;

// 20 steps of FlatAdam (one range over the whole buffer, decay wd) and of a libtorch optimizer on
// a copy of the same parameter with the same gradients; FlatAdam multiplies its gradient by
// grad_scale inside the kernel, the reference gets the product. The reference runs in fp64:
// torch's fp32 AdamW rounds its decay factor 1 - lr*wd to fp32, a relative error of up to 6e-8
// per step on every parameter, which alone would approach 1e-6 over 20 steps.
template <typename TorchOptimizer, typename TorchOptions>
void compare_with_torch_one_isa(const config::OptimizerConfig& config, float grad_scale) {
  const int64_t n = 100'003;  // several parallel chunks and a vector tail
  auto gen = at::make_generator<at::CPUGeneratorImpl>(17);
  const at::Tensor init = at::randn({n}, gen);
  at::Tensor flat = init.clone();
  at::Tensor ref = init.to(at::kDouble).requires_grad_(true);

  FlatAdam adam(config, n, {{0, n, config.weight_decay}});
  TorchOptimizer torch_opt({ref}, TorchOptions(config.lr)
                                      .betas({config.betas[0], config.betas[1]})
                                      .eps(config.eps)
                                      .weight_decay(config.weight_decay));
  for (int step = 0; step < 20; ++step) {
    const at::Tensor grad = at::randn({n}, gen) * 0.1;
    static_cast<TorchOptions&>(torch_opt.param_groups()[0].options()).lr(lr_at(step));
    ref.mutable_grad() = (grad * grad_scale).to(at::kDouble);  // what the kernel computes first
    torch_opt.step();
    adam.step(flat, grad, lr_at(step), grad_scale);
  }
  EXPECT_EQ(adam.step_count(), 20);
  ::testing::Test::RecordProperty(
      detail::concat("rel_diff_param_", platform::to_string(platform::kernel_isa())),
      detail::concat(rel_diff(flat, ref.detach())));
  EXPECT_LE(rel_diff(flat, ref.detach()), 1e-6);
  auto& state = static_cast<TorchState<TorchOptimizer>&>(
      *torch_opt.state().at(c10::guts::to_string(ref.unsafeGetTensorImpl())));
  EXPECT_LE(rel_diff(adam.exp_avg(), state.exp_avg()), 1e-6);
  EXPECT_LE(rel_diff(adam.exp_avg_sq(), state.exp_avg_sq()), 1e-6);
  EXPECT_GT(rel_diff(flat, init), 1e-3);  // the parameters did move
}

// The comparison for every kernel variant this CPU can run.
template <typename TorchOptimizer, typename TorchOptions>
void compare_with_torch(const config::OptimizerConfig& config, float grad_scale) {
  for (platform::KernelIsa isa : testing::supported_kernel_isas()) {
    SCOPED_TRACE(to_string(isa));
    testing::ScopedKernelIsa forced(isa);
    compare_with_torch_one_isa<TorchOptimizer, TorchOptions>(config, grad_scale);
  }
}

TEST(FlatAdam, MatchesTorchAdamW) {
  compare_with_torch<torch::optim::AdamW, torch::optim::AdamWOptions>(adamw_config(), 1.0f);
}

TEST(FlatAdam, AdamWithoutAdamWModeIsL2AndMatchesTorchAdam) {
  config::OptimizerConfig c = adamw_config();
  c.type = "Adam";
  c.adam_w_mode = false;
  compare_with_torch<torch::optim::Adam, torch::optim::AdamOptions>(c, 1.0f);
}

TEST(FlatAdam, GradScaleIsAppliedToTheGradient) {
  compare_with_torch<torch::optim::AdamW, torch::optim::AdamWOptions>(adamw_config(), 1.0f / 3.0f);
}

// One element, one step, DeepSpeed's formula written out in double precision.
TEST(AdamStep, FollowsDeepSpeedFormula) {
  for (const bool decoupled : {true, false}) {
    for (const bool bias_correction : {true, false}) {
      AdamHyper h;
      h.lr = 0.01;
      h.beta1 = 0.8;
      h.beta2 = 0.9;
      h.eps = 1e-3;
      h.decoupled = decoupled;
      h.bias_correction = bias_correction;
      const double wd = 0.5, p0 = 2.0, m0 = 0.1, v0 = 0.04, g0 = 0.3, scale = 0.5;
      const int64_t step = 3;
      float p = float(p0), m = float(m0), v = float(v0);
      const float g = float(g0);
      adam_step(&p, &g, &m, &v, 1, h, wd, step, float(scale));

      double g_eff = g0 * scale + (decoupled ? 0.0 : wd * p0);
      const double m1 = 0.8 * m0 + 0.2 * g_eff, v1 = 0.9 * v0 + 0.1 * g_eff * g_eff;
      const double bc1 = bias_correction ? 1 - std::pow(0.8, 3) : 1.0;
      const double bc2 = bias_correction ? 1 - std::pow(0.9, 3) : 1.0;
      const double update = m1 / (std::sqrt(v1) / std::sqrt(bc2) + 1e-3);
      const double p1 = p0 - (decoupled ? 0.01 * wd * p0 : 0.0) - 0.01 / bc1 * update;
      EXPECT_NEAR(m, m1, 1e-7);
      EXPECT_NEAR(v, v1, 1e-7);
      EXPECT_NEAR(p, p1, 1e-6) << "decoupled " << decoupled << " bias_correction "
                               << bias_correction;
    }
  }
}

// Ranges with and without decay and a padding gap, against two torch AdamW parameter groups.
TEST(FlatAdam, WeightDecayPerRangeAndGapsUntouched) {
  const config::OptimizerConfig c = adamw_config();
  const int64_t n = 1000;
  const std::vector<ParamRange> ranges = {
      {0, 400, c.weight_decay}, {400, 300, 0.0}, {750, 250, c.weight_decay}};  // gap [700, 750)
  auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
  const at::Tensor init = at::randn({n}, gen);
  at::Tensor flat = init.clone();
  std::vector<at::Tensor> refs;
  for (const auto& r : ranges) {
    refs.push_back(init.narrow(0, r.offset, r.numel).to(at::kDouble));  // fp64 reference
  }
  for (auto& t : refs) t.requires_grad_(true);
  auto options = [&](double wd) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(c.lr).betas({0.9, 0.95}).eps(c.eps).weight_decay(wd));
  };
  torch::optim::AdamW torch_opt(
      std::vector<torch::optim::OptimizerParamGroup>{
          torch::optim::OptimizerParamGroup({refs[0], refs[2]}, options(c.weight_decay)),
          torch::optim::OptimizerParamGroup({refs[1]}, options(0.0))},
      torch::optim::AdamWOptions(c.lr));

  FlatAdam adam(c, n, ranges);
  for (int step = 0; step < 20; ++step) {
    const at::Tensor grad = at::randn({n}, gen);
    for (size_t i = 0; i < ranges.size(); ++i) {
      refs[i].mutable_grad() = grad.narrow(0, ranges[i].offset, ranges[i].numel).to(at::kDouble);
    }
    torch_opt.step();
    adam.step(flat, grad, c.lr, 1.0f);
  }
  for (size_t i = 0; i < ranges.size(); ++i) {
    EXPECT_LE(rel_diff(flat.narrow(0, ranges[i].offset, ranges[i].numel), refs[i].detach()), 1e-6)
        << "range " << i;
  }
  EXPECT_TRUE(torch::equal(flat.narrow(0, 700, 50), init.narrow(0, 700, 50)));
  EXPECT_EQ(adam.exp_avg().narrow(0, 700, 50).abs().max().item<float>(), 0.0f);

  // Without decay a zero gradient leaves a zero-state parameter where it is; with decay it shrinks.
  FlatAdam fresh(c, 2, {{0, 1, 0.0}, {1, 1, 0.5}});
  at::Tensor p = torch::ones({2});
  fresh.step(p, torch::zeros({2}), 0.1, 1.0f);
  EXPECT_EQ(p[0].item<float>(), 1.0f);
  EXPECT_FLOAT_EQ(p[1].item<float>(), 1.0f - 0.1f * 0.5f);
}

TEST(FlatAdam, ThreadCountDoesNotChangeTheResult) {
  const int64_t n = 300'001;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
  const at::Tensor init = at::randn({n}, gen), grad = at::randn({n}, gen);
  const int threads = at::get_num_threads();
  for (platform::KernelIsa isa : testing::supported_kernel_isas()) {
    testing::ScopedKernelIsa forced(isa);
    std::vector<at::Tensor> results;
    for (int t : {1, 2}) {
      at::set_num_threads(t);
      FlatAdam adam(adamw_config(), n, {{0, n, 0.1}});
      at::Tensor p = init.clone();
      for (int step = 0; step < 3; ++step) adam.step(p, grad, 1e-3, 1.0f);
      results.push_back(p);
    }
    EXPECT_TRUE(torch::equal(results[0], results[1])) << to_string(isa);
  }
  at::set_num_threads(threads);
}

TEST(FlatAdam, RejectsBadInput) {
  config::OptimizerConfig c = adamw_config();
  EXPECT_THROW(FlatAdam(c, 10, {{5, 6, 0.0}}), Error);  // range past the end
  c.amsgrad = true;
  EXPECT_THROW(FlatAdam(c, 10, {{0, 10, 0.0}}), ConfigError);
  c.amsgrad = false;
  c.type = "SGD";
  EXPECT_THROW(FlatAdam(c, 10, {{0, 10, 0.0}}), ConfigError);

  FlatAdam adam(adamw_config(), 10, {{0, 10, 0.0}});
  EXPECT_THROW(adam.step(torch::zeros({9}), torch::zeros({10}), 1e-3, 1.0f), Error);
  EXPECT_THROW(adam.step(torch::zeros({10}, torch::kDouble), torch::zeros({10}), 1e-3, 1.0f),
               Error);
  // The bf16 copy must be a bf16 tensor of numel() elements.
  EXPECT_THROW(adam.step(torch::zeros({10}), torch::zeros({10}), 1e-3, 1.0f, torch::zeros({10})),
               Error);
  EXPECT_THROW(adam.step(torch::zeros({10}), torch::zeros({10}), 1e-3, 1.0f,
                         torch::zeros({9}, torch::kBFloat16)),
               Error);
  EXPECT_EQ(adam.step_count(), 0);
}

// Ranges with param_offset (ZeRO stages 1/2 in fp32: the owned slices of a larger parameter
// buffer are updated in place) give bit for bit what a contiguous parameter copy gets, and leave
// every other element of the parameter buffer alone.
TEST(FlatAdam, ParamOffsetsUpdateSlicesOfALargerBufferInPlace) {
  const config::OptimizerConfig c = adamw_config();
  const std::vector<ParamRange> contiguous = {{0, 30, c.weight_decay}, {30, 20, 0.0}};
  const std::vector<ParamRange> in_place = {{0, 30, c.weight_decay, 100}, {30, 20, 0.0, 7}};
  auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
  const at::Tensor buffer0 = at::randn({200}, gen);
  at::Tensor buffer = buffer0.clone();
  at::Tensor shard = torch::cat({buffer0.narrow(0, 100, 30), buffer0.narrow(0, 7, 20)});
  FlatAdam a(c, 50, contiguous), b(c, 50, in_place);
  for (int step = 0; step < 5; ++step) {
    const at::Tensor grad = at::randn({50}, gen);
    a.step(shard, grad, c.lr, 0.5f);
    b.step(buffer, grad, c.lr, 0.5f);
  }
  EXPECT_TRUE(torch::equal(buffer.narrow(0, 100, 30), shard.narrow(0, 0, 30)));
  EXPECT_TRUE(torch::equal(buffer.narrow(0, 7, 20), shard.narrow(0, 30, 20)));
  at::Tensor untouched = buffer0.clone();
  untouched.narrow(0, 100, 30).copy_(buffer.narrow(0, 100, 30));
  untouched.narrow(0, 7, 20).copy_(buffer.narrow(0, 7, 20));
  EXPECT_TRUE(torch::equal(buffer, untouched));
  EXPECT_THROW(b.step(buffer.narrow(0, 0, 120), at::zeros({50}), c.lr, 1.0f), Error);
}

// Sub-group stepping (ZeRO-Offload/Infinity): windows of any size with their own moment arrays
// give the same bits as one step over the buffer, ranges with gaps and parameter offsets included.
TEST(FlatAdam, StepWindowsEqualOneStepBitForBit) {
  const auto config = adamw_config();
  const int64_t n = 5'000;
  // Two ranges with a gap, the second's parameters elsewhere in a larger buffer.
  std::vector<ParamRange> ranges = {{0, 2'000, 0.1}, {2'100, 2'900, 0.0, 6'000}};
  auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
  const at::Tensor init = at::randn({9'000}, gen);
  at::Tensor whole = init.clone(), windowed = init.clone();
  FlatAdam ref(config, n, ranges);
  FlatAdam win(config, n, ranges, /*host_state=*/false);
  EXPECT_FALSE(win.exp_avg().defined());
  std::vector<float> m(n, 0.0f), v(n, 0.0f);
  for (int step = 0; step < 5; ++step) {
    const at::Tensor grad = at::randn({n}, gen);
    ref.step(whole, grad, lr_at(step), 0.5f);
    win.begin_step();
    for (int64_t lo = 0; lo < n; lo += 777) {
      const int64_t len = std::min<int64_t>(777, n - lo);
      std::vector<float> wm(m.begin() + lo, m.begin() + lo + len),
          wv(v.begin() + lo, v.begin() + lo + len);
      win.step_window(lo, len, windowed.data_ptr<float>(), windowed.data_ptr<float>() + lo,
                      grad.data_ptr<float>(), wm.data(), wv.data(), lr_at(step), 0.5f);
      std::copy(wm.begin(), wm.end(), m.begin() + lo);
      std::copy(wv.begin(), wv.end(), v.begin() + lo);
    }
  }
  EXPECT_TRUE(at::equal(whole, windowed));
  EXPECT_TRUE(at::equal(ref.exp_avg(), at::from_blob(m.data(), {n})));
  EXPECT_TRUE(at::equal(ref.exp_avg_sq(), at::from_blob(v.data(), {n})));
  EXPECT_EQ(win.step_count(), 5);
}

}  // namespace flat_adam_test
}  // namespace deepshard::optim
