// The fused AdamW kernel (FlatAdam over adam_step: one pass, explicit AVX-512 / AVX2+FMA
// intrinsics or the scalar fallback, forced with platform::force_kernel_isa) against
// torch::optim::AdamW (a sequence of tensor ops) on 50M fp32 elements, with 1 and 2 intra-op
// threads, with and without the fused bf16 copy of the parameters. Reported: wall time per step and
// the bytes the fused kernel must move (param, grad, exp_avg, exp_avg_sq read; three written; plus
// 2 bytes of bf16).
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <cstdlib>

#include "optim/adam.h"
#include "platform/kernel_isa.h"

namespace {

using deepshard::platform::KernelIsa;

constexpr int64_t kNumel = 50'000'000;
constexpr int64_t kBytesPerElement = 7 * sizeof(float);
constexpr KernelIsa kIsas[] = {KernelIsa::kScalar, KernelIsa::kAvx2, KernelIsa::kAvx512};

deepshard::config::OptimizerConfig adamw() {
  deepshard::config::OptimizerConfig c;
  c.type = "AdamW";
  c.lr = 1e-3;
  c.weight_decay = 0.1;
  return c;
}

// Args: ISA index in kIsas, threads, bf16 copy (0/1).
void BM_FusedAdamW(benchmark::State& state) {
  const KernelIsa isa = kIsas[state.range(0)];
  if (!deepshard::platform::kernel_isa_supported(isa)) {
    state.SkipWithError("this CPU cannot run the variant");
    return;
  }
  deepshard::platform::force_kernel_isa(isa);
  at::set_num_threads(int(state.range(1)));
  const bool with_bf16 = state.range(2) != 0;
  const auto c = adamw();
  deepshard::optim::FlatAdam adam(c, kNumel, {{0, kNumel, c.weight_decay}});
  at::Tensor param = torch::randn({kNumel}), grad = torch::randn({kNumel});
  at::Tensor bf16 = with_bf16 ? torch::zeros({kNumel}, torch::kBFloat16) : at::Tensor();
  for (auto _ : state) adam.step(param, grad, c.lr, 1.0f, bf16);
  deepshard::platform::force_kernel_isa(std::nullopt);
  state.SetBytesProcessed(state.iterations() * kNumel * (kBytesPerElement + (with_bf16 ? 2 : 0)));
  state.SetLabel(deepshard::platform::to_string(isa));
}

void BM_TorchAdamW(benchmark::State& state) {
  at::set_num_threads(int(state.range(0)));
  const auto c = adamw();
  at::Tensor param = torch::randn({kNumel}).requires_grad_(true);
  param.mutable_grad() = torch::randn({kNumel});
  torch::optim::AdamW opt({param}, torch::optim::AdamWOptions(c.lr).weight_decay(c.weight_decay));
  for (auto _ : state) opt.step();
  state.SetBytesProcessed(state.iterations() * kNumel * kBytesPerElement);
}

BENCHMARK(BM_FusedAdamW)
    ->ArgNames({"isa", "threads", "bf16"})
    ->ArgsProduct({{0, 1, 2}, {1, 2}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_TorchAdamW)
    ->ArgNames({"threads"})
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
