// A bf16 model's Linear layers, forward + backward (dX, dW, db) on one thread, five ways
// (kernels/bf16_compute.h): libtorch's native bf16 kernels (oneDNN; AVX512-BF16/AMX where the CPU
// has them); libtorch's generic bf16 GEMM (oneDNN switched off: what libtorch 1.13 runs on a CPU
// without AVX-512); kernels::linear computing in fp32 with the bf16 operands converted at each
// product (the fp32 path deepshard runs); the same products with the weight kept as an fp32
// working copy (converted once, outside the loop: what caching gathered weights in fp32 would
// save); and plain fp32 (kernels::linear on fp32 tensors). Shapes as linear_bench: one block of the
// peers' GPT (8 x 128 tokens, C 256) and of `small` (8 x 256, C 384). Args: model (0 = peer,
// 1 = small), layer (0 = qkv, 1 = attn proj, 2 = fc, 3 = mlp proj, 4 = head). Counter: GFLOP/s
// of the three products.
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "kernels/bf16_compute.h"
#include "kernels/linear.h"
#include "linear_shapes.h"

namespace {

using deepshard::kernels::Bf16Compute;

struct Operands {
  at::Tensor x, w, b, dy;
  int64_t rows, in, out;
};

Operands operands(const benchmark::State& state, at::ScalarType dtype) {
  const auto [rows, in, out, bias] = deepshard::bench::linear_shape(state);
  Operands o{torch::randn({rows, in}).to(dtype).requires_grad_(true),
             (torch::randn({out, in}) * 0.02).to(dtype).requires_grad_(true),
             bias ? torch::zeros({out}, dtype).requires_grad_(true) : at::Tensor(),
             torch::randn({rows, out}).to(dtype),
             rows,
             in,
             out};
  return o;
}

template <typename F>
void run(benchmark::State& state, const Operands& o, F f) {
  std::vector<at::Tensor> inputs = {o.x, o.w};
  if (o.b.defined()) inputs.push_back(o.b);
  for (auto _ : state) {
    at::Tensor y = f();
    auto g = torch::autograd::grad({y}, inputs, {o.dy});
    benchmark::DoNotOptimize(g[1].data_ptr());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(6.0 * double(o.rows * o.in * o.out) * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

void set_compute(Bf16Compute c) { deepshard::kernels::set_bf16_compute({c, "bench"}); }

void BM_Bf16Native(benchmark::State& state) {
  at::set_num_threads(1);
  set_compute(Bf16Compute::kNative);
  const Operands o = operands(state, at::kBFloat16);
  run(state, o, [&] { return torch::linear(o.x, o.w, o.b); });
}

void BM_Bf16GenericGemm(benchmark::State& state) {
  at::set_num_threads(1);
  set_compute(Bf16Compute::kNative);
  const Operands o = operands(state, at::kBFloat16);
  at::globalContext().setUserEnabledMkldnn(false);
  run(state, o, [&] { return torch::linear(o.x, o.w, o.b); });
  at::globalContext().setUserEnabledMkldnn(true);
}

void BM_Bf16InFp32(benchmark::State& state) {
  at::set_num_threads(1);
  set_compute(Bf16Compute::kFp32);
  const Operands o = operands(state, at::kBFloat16);
  run(state, o, [&] { return deepshard::kernels::linear(o.x, o.w, o.b); });
  set_compute(Bf16Compute::kNative);
}

// The weight (and bias) converted once: the gradient flows into the fp32 copies, x is converted
// per call as it would be (activations change every step).
void BM_Bf16InFp32WeightCopy(benchmark::State& state) {
  at::set_num_threads(1);
  const Operands bf16 = operands(state, at::kBFloat16);
  Operands o = bf16;
  o.w = bf16.w.detach().to(at::kFloat).requires_grad_(true);
  o.b = bf16.b.defined() ? bf16.b.detach().to(at::kFloat).requires_grad_(true) : at::Tensor();
  run(state, o,
      [&] { return deepshard::kernels::linear(o.x.to(at::kFloat), o.w, o.b).to(at::kBFloat16); });
}

void BM_Fp32(benchmark::State& state) {
  at::set_num_threads(1);
  const Operands o = operands(state, at::kFloat);
  run(state, o, [&] { return deepshard::kernels::linear(o.x, o.w, o.b); });
}

#define DS_BF16_LINEAR_BENCH(name)             \
  BENCHMARK(name)                              \
      ->ArgNames({"model", "layer"})           \
      ->ArgsProduct({{0, 1}, {0, 1, 2, 3, 4}}) \
      ->Unit(benchmark::kMicrosecond)
DS_BF16_LINEAR_BENCH(BM_Bf16Native);
DS_BF16_LINEAR_BENCH(BM_Bf16GenericGemm);
DS_BF16_LINEAR_BENCH(BM_Bf16InFp32);
DS_BF16_LINEAR_BENCH(BM_Bf16InFp32WeightCopy);
DS_BF16_LINEAR_BENCH(BM_Fp32);

}  // namespace

BENCHMARK_MAIN();
