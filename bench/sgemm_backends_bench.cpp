// The two fp32 GEMM backends the fused kernels choose between (platform/sgemm.h), side by side on
// each product a Linear layer runs, in one process on one thread: oneDNN's dnnl_sgemm and the
// sgemm_ of the OpenBLAS libtorch loads (its core as the environment sets it: OPENBLAS_CORETYPE,
// or scripts/isa_env.sh's --isa). The shapes are the peers' GPT's (8 x 128 tokens, C 256) and the
// `small` preset's (8 x 256, C 384): attention qkv and proj, MLP fc and proj, the tied head.
// Args: model (0 = peer, 1 = small), layer (0 = qkv, 1 = attn proj, 2 = fc, 3 = mlp proj,
// 4 = head), product (0 = forward y = x Wᵀ, 1 = dX = dY W, 2 = dW = dYᵀ X). Counter: GFLOP/s.
// The fastest possible per-product choice is the faster of the two rows of each product.
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "linear_shapes.h"
#include "platform/blas_kernels.h"
#include "platform/dnnl_sgemm.h"
#include "platform/sgemm.h"

namespace {

using deepshard::platform::dnnl_sgemm_row_major;

// A row-major product C[m, n] = op(A) op(B) with its transpositions.
struct Product {
  bool ta, tb;
  int m, n, k;
};

Product product_of(const benchmark::State& state) {
  const auto s = deepshard::bench::linear_shape(state);
  const int rows = int(s.rows), in = int(s.in), out = int(s.out);
  switch (state.range(2)) {
    case 0:
      return {false, true, rows, out, in};  // y = x Wᵀ
    case 1:
      return {false, false, rows, in, out};  // dX = dY W
    default:
      return {true, false, out, in, rows};  // dW = dYᵀ X
  }
}

template <typename Gemm>
void sgemm_bench(benchmark::State& state, Gemm gemm) {
  at::set_num_threads(1);  // oneDNN's sgemm runs on the calling thread's OpenMP thread count
  const Product p = product_of(state);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  std::vector<float> a(size_t(p.m) * p.k), b(size_t(p.k) * p.n), c(size_t(p.m) * p.n);
  for (float& v : a) v = normal(rng);
  for (float& v : b) v = normal(rng);
  const int lda = p.ta ? p.m : p.k, ldb = p.tb ? p.k : p.n;
  for (auto _ : state) {
    gemm(p, a.data(), lda, b.data(), ldb, c.data());
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * double(p.m) * p.n * p.k * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

void BM_OneDnnSgemm(benchmark::State& state) {
  if (!deepshard::platform::dnnl_sgemm_usable()) {
    state.SkipWithError("oneDNN's sgemm is not usable here");
    return;
  }
  sgemm_bench(state,
              [](const Product& p, const float* a, int lda, const float* b, int ldb, float* c) {
                dnnl_sgemm_row_major(p.ta, p.tb, p.m, p.n, p.k, 1.0f, a, lda, b, ldb, 0.0f, c, p.n);
              });
}

void BM_OpenBlasSgemm(benchmark::State& state) {
  const auto sgemm = deepshard::platform::loaded_blas_sgemm();
  if (sgemm == nullptr || deepshard::platform::openblas_corename().empty()) {
    state.SkipWithError("no OpenBLAS loaded");
    return;
  }
  deepshard::platform::set_openblas_threads(1);
  // Row-major C is column-major Cᵀ = op(B)ᵀ op(A)ᵀ: the operands swap, the transpositions stay.
  sgemm_bench(
      state, [sgemm](const Product& p, const float* a, int lda, const float* b, int ldb, float* c) {
        const float one = 1.0f, zero = 0.0f;
        sgemm(p.tb ? "T" : "N", p.ta ? "T" : "N", &p.n, &p.m, &p.k, &one, b, &ldb, a, &lda, &zero,
              c, &p.n);
      });
}

#define DS_SGEMM_BENCH(name)                              \
  BENCHMARK(name)                                         \
      ->ArgNames({"model", "layer", "product"})           \
      ->ArgsProduct({{0, 1}, {0, 1, 2, 3, 4}, {0, 1, 2}}) \
      ->Unit(benchmark::kMicrosecond)
DS_SGEMM_BENCH(BM_OneDnnSgemm);
DS_SGEMM_BENCH(BM_OpenBlasSgemm);

}  // namespace

BENCHMARK_MAIN();
