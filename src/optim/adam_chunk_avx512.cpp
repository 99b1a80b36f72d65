// The AVX-512 Adam chunk kernel: 16 lanes per iteration with explicit intrinsics, compiled for
// the avx512 kernel level by a function attribute (platform/kernel_isa.h; the build needs no
// -march flag; adam_step calls it only when that level is platform::kernel_isa()). The bf16 copy is
// rounded in integer lanes as torch rounds it.
#include "optim/adam_chunk.h"

#if DS_X86_KERNELS
#include <immintrin.h>

// GCC 12's AVX-512 intrinsics (sqrt, shifts, narrowing) pass a self-initialised "undefined" vector
// as the unused merge source and warn about it where they are inlined (GCC bug 105593, fixed in
// GCC 13); the warning is about the header's idiom, not this code.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace deepshard::optim::kernel {
namespace {

constexpr int kLanes = 16;

struct Lanes {
  __m512 beta1, one_minus_beta1, beta2, one_minus_beta2, step_size, inv_sqrt_bc2, eps, l2, decay,
      grad_scale;
};

DS_TARGET_AVX512 Lanes broadcast(const StepConstants& c) {
  return {_mm512_set1_ps(c.beta1),     _mm512_set1_ps(c.one_minus_beta1),
          _mm512_set1_ps(c.beta2),     _mm512_set1_ps(c.one_minus_beta2),
          _mm512_set1_ps(c.step_size), _mm512_set1_ps(c.inv_sqrt_bc2),
          _mm512_set1_ps(c.eps),       _mm512_set1_ps(c.l2),
          _mm512_set1_ps(c.decay),     _mm512_set1_ps(c.grad_scale)};
}

// float_to_bf16 on 16 lanes, narrowed to 16 bits.
DS_TARGET_AVX512 __m256i to_bf16(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i bias = _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, bias), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  r = _mm512_mask_mov_epi32(r, nan, _mm512_set1_epi32(kBf16Nan));
  return _mm512_cvtepi32_epi16(r);
}

template <bool kBf16>
DS_TARGET_AVX512 void update16(const AdamArrays& a, const Lanes& k) {
  const __m512 p = _mm512_loadu_ps(a.param);
  const __m512 g = _mm512_fmadd_ps(k.l2, p, _mm512_mul_ps(_mm512_loadu_ps(a.grad), k.grad_scale));
  const __m512 m =
      _mm512_fmadd_ps(k.one_minus_beta1, g, _mm512_mul_ps(k.beta1, _mm512_loadu_ps(a.exp_avg)));
  const __m512 v = _mm512_fmadd_ps(_mm512_mul_ps(k.one_minus_beta2, g), g,
                                   _mm512_mul_ps(k.beta2, _mm512_loadu_ps(a.exp_avg_sq)));
  _mm512_storeu_ps(a.exp_avg, m);
  _mm512_storeu_ps(a.exp_avg_sq, v);
  const __m512 denom = _mm512_fmadd_ps(_mm512_sqrt_ps(v), k.inv_sqrt_bc2, k.eps);
  const __m512 updated =
      _mm512_fmadd_ps(k.step_size, _mm512_div_ps(m, denom), _mm512_fmadd_ps(k.decay, p, p));
  _mm512_storeu_ps(a.param, updated);
  if constexpr (kBf16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(a.param_bf16), to_bf16(updated));
  }
}

template <bool kBf16>
DS_TARGET_AVX512 void run(const AdamArrays& a, int64_t n, const StepConstants& c) {
  const Lanes k = broadcast(c);
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) update16<kBf16>(a.at(i), k);
  if (i < n) {
    StagedTail<kLanes> tail(a.at(i), n - i);
    update16<kBf16>(tail.arrays(), k);
    tail.copy_back(a.at(i), n - i);
  }
}

}  // namespace

void adam_chunk_avx512(const AdamArrays& a, int64_t n, const StepConstants& c) {
  if (a.param_bf16) {
    run<true>(a, n, c);
  } else {
    run<false>(a, n, c);
  }
}

}  // namespace deepshard::optim::kernel
#endif  // DS_X86_KERNELS
