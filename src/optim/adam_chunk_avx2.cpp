// The AVX2+FMA Adam chunk kernel: 8 lanes per iteration with explicit intrinsics, compiled for
// the avx2 kernel level (AVX2 and FMA) by a function attribute (platform/kernel_isa.h; the build
// needs no -march flag; adam_step calls it only when that level is platform::kernel_isa()). The
// bf16 copy is rounded in integer lanes as torch rounds it.
#include "optim/adam_chunk.h"

#if DS_X86_KERNELS
#include <immintrin.h>

namespace deepshard::optim::kernel {
namespace {

constexpr int kLanes = 8;

struct Lanes {
  __m256 beta1, one_minus_beta1, beta2, one_minus_beta2, step_size, inv_sqrt_bc2, eps, l2, decay,
      grad_scale;
};

DS_TARGET_AVX2 Lanes broadcast(const StepConstants& c) {
  return {_mm256_set1_ps(c.beta1),     _mm256_set1_ps(c.one_minus_beta1),
          _mm256_set1_ps(c.beta2),     _mm256_set1_ps(c.one_minus_beta2),
          _mm256_set1_ps(c.step_size), _mm256_set1_ps(c.inv_sqrt_bc2),
          _mm256_set1_ps(c.eps),       _mm256_set1_ps(c.l2),
          _mm256_set1_ps(c.decay),     _mm256_set1_ps(c.grad_scale)};
}

// float_to_bf16 on 8 lanes, narrowed to 16 bits (values fit, so unsigned saturation is exact).
DS_TARGET_AVX2 __m128i to_bf16(__m256 x) {
  const __m256i u = _mm256_castps_si256(x);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i bias = _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF));
  __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, bias), 16);
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  r = _mm256_blendv_epi8(r, _mm256_set1_epi32(kBf16Nan), nan);
  return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
}

template <bool kBf16>
DS_TARGET_AVX2 void update8(const AdamArrays& a, const Lanes& k) {
  const __m256 p = _mm256_loadu_ps(a.param);
  const __m256 g = _mm256_fmadd_ps(k.l2, p, _mm256_mul_ps(_mm256_loadu_ps(a.grad), k.grad_scale));
  const __m256 m =
      _mm256_fmadd_ps(k.one_minus_beta1, g, _mm256_mul_ps(k.beta1, _mm256_loadu_ps(a.exp_avg)));
  const __m256 v = _mm256_fmadd_ps(_mm256_mul_ps(k.one_minus_beta2, g), g,
                                   _mm256_mul_ps(k.beta2, _mm256_loadu_ps(a.exp_avg_sq)));
  _mm256_storeu_ps(a.exp_avg, m);
  _mm256_storeu_ps(a.exp_avg_sq, v);
  const __m256 denom = _mm256_fmadd_ps(_mm256_sqrt_ps(v), k.inv_sqrt_bc2, k.eps);
  const __m256 updated =
      _mm256_fmadd_ps(k.step_size, _mm256_div_ps(m, denom), _mm256_fmadd_ps(k.decay, p, p));
  _mm256_storeu_ps(a.param, updated);
  if constexpr (kBf16) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(a.param_bf16), to_bf16(updated));
  }
}

template <bool kBf16>
DS_TARGET_AVX2 void run(const AdamArrays& a, int64_t n, const StepConstants& c) {
  const Lanes k = broadcast(c);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) update8<kBf16>(a.at(i), k);
  if (i < n) {
    StagedTail<kLanes> tail(a.at(i), n - i);
    update8<kBf16>(tail.arrays(), k);
    tail.copy_back(a.at(i), n - i);
  }
}

}  // namespace

void adam_chunk_avx2(const AdamArrays& a, int64_t n, const StepConstants& c) {
  if (a.param_bf16) {
    run<true>(a, n, c);
  } else {
    run<false>(a, n, c);
  }
}

}  // namespace deepshard::optim::kernel
#endif  // DS_X86_KERNELS
