// kernels::linear (on the sgemm backend `auto` picks for this CPU: platform/sgemm.h) against
// torch::linear (libtorch's matmul: OpenBLAS's sgemm), forward + backward (dX, dW, db) in fp32 on
// one thread (a rank's share of 2 cores at N = 2), on the Linear layers of one block of `small`
// (8 x 256 tokens, C 384) and of the peers' GPT (8 x 128, C 256): attention qkv and proj, MLP fc
// and proj, and the head tied to the 256-token vocabulary. The two backends alone, product by
// product: sgemm_backends_bench.
// Args: model (0 = peer, 1 = small), layer (0 = qkv, 1 = attn proj, 2 = fc, 3 = mlp proj, 4 =
// head). Counters: GFLOP/s of the three matmuls (6 rows·in·out per iteration).
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "kernels/linear.h"
#include "linear_shapes.h"

namespace {

template <typename F>
void linear_bench(benchmark::State& state, F f) {
  at::set_num_threads(1);
  const auto [rows, in, out, bias] = deepshard::bench::linear_shape(state);
  const at::Tensor x = torch::randn({rows, in}).requires_grad_(true);
  const at::Tensor w = (torch::randn({out, in}) * 0.02).requires_grad_(true);
  const at::Tensor b = bias ? torch::zeros({out}).requires_grad_(true) : at::Tensor();
  std::vector<at::Tensor> inputs = {x, w};
  if (bias) inputs.push_back(b);
  const at::Tensor dy = torch::randn({rows, out});
  for (auto _ : state) {
    at::Tensor y = f(x, w, b);
    auto g = torch::autograd::grad({y}, inputs, {dy});
    benchmark::DoNotOptimize(g[1].data_ptr());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(6.0 * double(rows * in * out) * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

void BM_FusedLinear(benchmark::State& state) {
  linear_bench(state, [](const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
    return deepshard::kernels::linear(x, w, b);
  });
}
void BM_TorchLinear(benchmark::State& state) {
  linear_bench(state, [](const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
    return torch::linear(x, w, b);
  });
}

#define DS_LINEAR_BENCH(name)                  \
  BENCHMARK(name)                              \
      ->ArgNames({"model", "layer"})           \
      ->ArgsProduct({{0, 1}, {0, 1, 2, 3, 4}}) \
      ->Unit(benchmark::kMicrosecond)
DS_LINEAR_BENCH(BM_FusedLinear);
DS_LINEAR_BENCH(BM_TorchLinear);

}  // namespace

BENCHMARK_MAIN();
