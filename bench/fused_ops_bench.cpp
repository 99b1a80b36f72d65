// The fused CPU kernels (kernels/fused_ops.h) against the libtorch sequences they replace, forward
// + backward on the activations of one layer of the peers' GPT (batch 8, 4 heads, T 128, C 256)
// and of `small` (8 x 6 heads, T 256, C 384), fp32 and bf16, one thread (a rank's share of 2 cores
// at N = 2). Args: model (0 = peer, 1 = small), dtype (0 = fp32, 1 = bf16). The blocked causal
// attention (kernels/causal_attention.h, fp32) against the GPT's unfused attention sequence.
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "kernels/causal_attention.h"
#include "kernels/fused_ops.h"
#include "platform/heap_policy.h"

namespace {

struct Shape {
  int64_t batch, heads, t, c, vocab;
};
constexpr Shape kShapes[] = {{8, 4, 128, 256, 256}, {8, 6, 256, 384, 256}};

at::ScalarType dtype_of(const benchmark::State& state) {
  return state.range(1) ? at::kBFloat16 : at::kFloat;
}

// Forward + backward of f on a fresh leaf copy of x, per iteration.
template <typename F>
void forward_backward(benchmark::State& state, const at::Tensor& x0, F f) {
  at::set_num_threads(1);
  const at::Tensor x = x0.detach().requires_grad_(true);
  for (auto _ : state) {
    at::Tensor y = f(x);
    auto g = torch::autograd::grad({y}, {x}, {at::ones_like(y)});
    benchmark::DoNotOptimize(g[0].data_ptr());
  }
  state.SetBytesProcessed(state.iterations() * x.nbytes());
}

at::Tensor gelu_input(const benchmark::State& state) {
  const Shape s = kShapes[state.range(0)];
  return torch::randn({s.batch, s.t, 4 * s.c}).to(dtype_of(state));
}
at::Tensor scores_input(const benchmark::State& state) {
  const Shape s = kShapes[state.range(0)];
  return torch::randn({s.batch, s.heads, s.t, s.t}).to(dtype_of(state));
}
at::Tensor logits_input(const benchmark::State& state) {
  const Shape s = kShapes[state.range(0)];
  return torch::randn({s.batch * s.t, s.vocab}).to(dtype_of(state));
}
at::Tensor targets_for(const at::Tensor& logits) {
  return torch::randint(0, logits.size(1), {logits.size(0)}, at::kLong);
}

void BM_FusedGeluTanh(benchmark::State& state) {
  forward_backward(state, gelu_input(state),
                   [](const at::Tensor& x) { return deepshard::kernels::gelu_tanh(x); });
}
void BM_TorchGeluTanh(benchmark::State& state) {
  forward_backward(state, gelu_input(state),
                   [](const at::Tensor& x) { return torch::gelu(x, "tanh"); });
}

void BM_FusedCausalSoftmax(benchmark::State& state) {
  const double scale = 0.125;
  forward_backward(state, scores_input(state), [&](const at::Tensor& x) {
    return deepshard::kernels::causal_softmax(x, scale);
  });
}
void BM_TorchCausalSoftmax(benchmark::State& state) {  // the GPT's former sequence
  const double scale = 0.125;
  forward_backward(state, scores_input(state), [&](const at::Tensor& x) {
    const int64_t t = x.size(-1);
    const at::Tensor mask =
        torch::full({t, t}, -std::numeric_limits<double>::infinity(), x.options()).triu(1);
    return torch::softmax(x * scale + mask, -1);
  });
}

// Layer norm of the block input [B, T, C]; the weight and bias take gradients too.
template <typename F>
void layer_norm_bench(benchmark::State& state, F f) {
  at::set_num_threads(1);
  const Shape s = kShapes[state.range(0)];
  const auto dtype = dtype_of(state);
  const at::Tensor x = torch::randn({s.batch, s.t, s.c}).to(dtype).requires_grad_(true);
  const at::Tensor w = torch::ones({s.c}).to(dtype).requires_grad_(true);
  const at::Tensor b = torch::zeros({s.c}).to(dtype).requires_grad_(true);
  for (auto _ : state) {
    at::Tensor y = f(x, w, b);
    auto g = torch::autograd::grad({y}, {x, w, b}, {at::ones_like(y)});
    benchmark::DoNotOptimize(g[0].data_ptr());
  }
  state.SetBytesProcessed(state.iterations() * x.nbytes());
}
void BM_FusedLayerNorm(benchmark::State& state) {
  layer_norm_bench(state, [](const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
    return deepshard::kernels::layer_norm(x, w, b, 1e-5);
  });
}
void BM_TorchLayerNorm(benchmark::State& state) {
  layer_norm_bench(state, [](const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
    return torch::layer_norm(x, {x.size(-1)}, w, b, 1e-5);
  });
}

void BM_FusedCrossEntropy(benchmark::State& state) {
  const at::Tensor logits = logits_input(state), targets = targets_for(logits);
  forward_backward(state, logits, [&](const at::Tensor& x) {
    return deepshard::kernels::cross_entropy(x, targets);
  });
}
void BM_TorchCrossEntropy(benchmark::State& state) {
  const at::Tensor logits = logits_input(state), targets = targets_for(logits);
  forward_backward(state, logits, [&](const at::Tensor& x) {
    return torch::nn::functional::cross_entropy(x.to(at::kFloat), targets);
  });
}

// Attention from the packed qkv [B, T, 3C] to [B, T, C] (fp32 only: bf16 keeps the unfused path).
at::Tensor qkv_input(const benchmark::State& state) {
  const Shape s = kShapes[state.range(0)];
  return torch::randn({s.batch, s.t, 3 * s.c});
}
void BM_BlockedCausalAttention(benchmark::State& state) {
  const int64_t heads = kShapes[state.range(0)].heads;
  forward_backward(state, qkv_input(state), [&](const at::Tensor& x) {
    return deepshard::kernels::causal_attention(x, heads);
  });
}
void BM_TorchCausalAttention(benchmark::State& state) {  // the GPT's unfused sequence
  const int64_t heads = kShapes[state.range(0)].heads;
  forward_backward(state, qkv_input(state), [&](const at::Tensor& x) {
    const int64_t b = x.size(0), t = x.size(1), c = x.size(2) / 3;
    const auto parts = x.split(c, 2);
    auto split_heads = [&](const at::Tensor& v) {
      return v.view({b, t, heads, c / heads}).transpose(1, 2);
    };
    const at::Tensor att = deepshard::kernels::causal_softmax(
        torch::matmul(split_heads(parts[0]), split_heads(parts[1]).transpose(-2, -1)),
        1.0 / std::sqrt(double(c / heads)));
    return torch::matmul(att, split_heads(parts[2])).transpose(1, 2).contiguous().view({b, t, c});
  });
}

#define DS_FUSED_BENCH(name)          \
  BENCHMARK(name)                     \
      ->ArgNames({"model", "bf16"})   \
      ->ArgsProduct({{0, 1}, {0, 1}}) \
      ->Unit(benchmark::kMicrosecond)
DS_FUSED_BENCH(BM_FusedLayerNorm);
DS_FUSED_BENCH(BM_TorchLayerNorm);
DS_FUSED_BENCH(BM_FusedGeluTanh);
DS_FUSED_BENCH(BM_TorchGeluTanh);
DS_FUSED_BENCH(BM_FusedCausalSoftmax);
DS_FUSED_BENCH(BM_TorchCausalSoftmax);
DS_FUSED_BENCH(BM_FusedCrossEntropy);
DS_FUSED_BENCH(BM_TorchCrossEntropy);
BENCHMARK(BM_BlockedCausalAttention)
    ->ArgNames({"model"})
    ->DenseRange(0, 1)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TorchCausalAttention)
    ->ArgNames({"model"})
    ->DenseRange(0, 1)
    ->Unit(benchmark::kMicrosecond);

}  // namespace

// With deepshard train's heap policy (platform/heap_policy.h), so that neither side pays for the
// page faults of its temporaries.
int main(int argc, char** argv) {
  deepshard::platform::retain_freed_heap_memory();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
