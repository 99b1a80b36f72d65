// Block-wise symmetric int8 quantize/dequantize (int8_quantize.h): a scalar loop, and AVX2 and
// AVX-512 loops written with intrinsics in functions compiled for those ISAs (target attributes),
// chosen at run time by platform::kernel_isa(). Every path computes a block's scale with the
// same scalar code from an exact maximum, multiplies once per element and rounds half to even
// (cvtps under the default MXCSR, rintf in C), so all three agree bit for bit.
#include "kernels/int8_quantize.h"

// GCC 12's AVX-512 headers start some intrinsics (abs, reductions, conversions) from
// _mm512_undefined_*(), which -Wuninitialized flags once they are inlined here (GCC bug 105593);
// every lane is written before it is used.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <immintrin.h>

#include <cfloat>

#include "deepshard/util/error.h"
#include "kernels/simd.h"
#include "platform/cpu_info.h"
#include "platform/kernel_isa.h"

namespace deepshard::kernels {
namespace {

using platform::KernelIsa;

inline float block_scale(float absmax) {
  return absmax < FLT_MIN ? 1.0f : 256.0f / (2.0f * absmax);
}

inline float load_scalar(const float* x, int64_t i) { return x[i]; }
inline float load_scalar(const uint16_t* x, int64_t i) { return simd::bf16_to_float(x[i]); }
inline void store_scalar(float* out, int64_t i, float v) { out[i] = v; }
inline void store_scalar(uint16_t* out, int64_t i, float v) { out[i] = simd::float_to_bf16(v); }

inline int8_t quantize_one(float v, float scale) {
  int32_t q = int32_t(__builtin_rintf(v * scale));
  q = q < -128 ? -128 : (q > 127 ? 127 : q);
  return int8_t(q);
}

// ---- scalar ----

template <typename T>
void quantize_scalar(const T* x, int64_t n, int8_t* q, float* inv_scale) {
  float absmax = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float a = __builtin_fabsf(load_scalar(x, i));
    absmax = a > absmax ? a : absmax;
  }
  const float scale = block_scale(absmax);
  for (int64_t i = 0; i < n; ++i) q[i] = quantize_one(load_scalar(x, i), scale);
  *inv_scale = 1.0f / scale;
}

template <typename T>
void dequantize_scalar(const int8_t* q, int64_t n, float inv_scale, T* out) {
  for (int64_t i = 0; i < n; ++i) store_scalar(out, i, float(q[i]) * inv_scale);
}

// ---- AVX2: 8 lanes, scalar tails ----

DS_TARGET_AVX2 inline __m256 load8(const float* x) { return _mm256_loadu_ps(x); }
DS_TARGET_AVX2 inline __m256 load8(const uint16_t* x) {
  const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}

template <typename T>
DS_TARGET_AVX2 void quantize_avx2(const T* x, int64_t n, int8_t* q, float* inv_scale) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 vmax = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) vmax = _mm256_max_ps(vmax, _mm256_andnot_ps(sign, load8(x + i)));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, vmax);
  float absmax = 0.0f;
  for (float l : lanes) absmax = l > absmax ? l : absmax;
  for (int64_t j = i; j < n; ++j) {
    const float a = __builtin_fabsf(load_scalar(x, j));
    absmax = a > absmax ? a : absmax;
  }
  const float scale = block_scale(absmax);
  const __m256 vscale = _mm256_set1_ps(scale);
  const __m256i lo = _mm256_set1_epi32(-128), hi = _mm256_set1_epi32(127);
  for (i = 0; i + 8 <= n; i += 8) {
    __m256i v = _mm256_cvtps_epi32(_mm256_mul_ps(load8(x + i), vscale));
    v = _mm256_min_epi32(_mm256_max_epi32(v, lo), hi);
    // 8 int32 -> 8 int8: pack to int16 (within 128-bit lanes), then to int8, then pick the bytes.
    const __m128i v16 = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    const __m128i v8 = _mm_packs_epi16(v16, v16);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(q + i), v8);
  }
  for (; i < n; ++i) q[i] = quantize_one(load_scalar(x, i), scale);
  *inv_scale = 1.0f / scale;
}

DS_TARGET_AVX2 void dequantize_avx2_f32(const int8_t* q, int64_t n, float inv_scale, float* out) {
  const __m256 vs = _mm256_set1_ps(inv_scale);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + i));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b)), vs));
  }
  for (; i < n; ++i) out[i] = float(q[i]) * inv_scale;
}

DS_TARGET_AVX2 void dequantize_avx2_bf16(const int8_t* q, int64_t n, float inv_scale,
                                         uint16_t* out) {
  const __m256 vs = _mm256_set1_ps(inv_scale);
  const __m256i round = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + i));
    const __m256i bits =
        _mm256_castps_si256(_mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b)), vs));
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(bits, 16), one);
    const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(bits, round), odd), 16);
    // Values fit in 16 unsigned bits: packus keeps them, per 128-bit lane.
    const __m128i packed =
        _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), packed);
  }
  for (; i < n; ++i) out[i] = simd::float_to_bf16(float(q[i]) * inv_scale);
}

// ---- AVX-512: 16 lanes, masked tails ----

DS_TARGET_AVX512 inline __m512 load16(const float* x, __mmask16 m) {
  return _mm512_maskz_loadu_ps(m, x);
}
DS_TARGET_AVX512 inline __m512 load16(const uint16_t* x, __mmask16 m) {
  const __m512i wide = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, x));
  return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
}

DS_TARGET_AVX512 inline __mmask16 tail_mask(int64_t left) {
  return left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
}

template <typename T>
DS_TARGET_AVX512 void quantize_avx512(const T* x, int64_t n, int8_t* q, float* inv_scale) {
  __m512 vmax = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    vmax = _mm512_max_ps(vmax, _mm512_abs_ps(load16(x + i, tail_mask(n - i))));
  }
  const float scale = block_scale(_mm512_reduce_max_ps(vmax));
  const __m512 vscale = _mm512_set1_ps(scale);
  const __m512i lo = _mm512_set1_epi32(-128), hi = _mm512_set1_epi32(127);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(load16(x + i, m), vscale));
    v = _mm512_min_epi32(_mm512_max_epi32(v, lo), hi);
    _mm_mask_storeu_epi8(q + i, m, _mm512_cvtepi32_epi8(v));
  }
  *inv_scale = 1.0f / scale;
}

DS_TARGET_AVX512 void dequantize_avx512_f32(const int8_t* q, int64_t n, float inv_scale,
                                            float* out) {
  const __m512 vs = _mm512_set1_ps(inv_scale);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512i v = _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, q + i));
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(_mm512_cvtepi32_ps(v), vs));
  }
}

DS_TARGET_AVX512 void dequantize_avx512_bf16(const int8_t* q, int64_t n, float inv_scale,
                                             uint16_t* out) {
  const __m512 vs = _mm512_set1_ps(inv_scale);
  const __m512i round = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512i v = _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, q + i));
    const __m512i bits = _mm512_castps_si512(_mm512_mul_ps(_mm512_cvtepi32_ps(v), vs));
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(bits, 16), one);
    const __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(bits, round), odd), 16);
    _mm256_mask_storeu_epi16(out + i, m, _mm512_cvtepi32_epi16(r));
  }
}

// ---- dispatch ----

void check(int64_t block, KernelIsa isa) {
  DS_CHECK(block >= 1, Error, "int8 quantization: block size must be >= 1, got ", block);
  DS_CHECK(platform::kernel_isa_supported(isa), Error, "int8 quantization: the ", to_string(isa),
           " implementation does not run on this CPU (", platform::detect_cpu().isa(), ")");
}

template <typename T>
void quantize_blocks_of(const T* x, int64_t n, int64_t block, int8_t* q, float* scales,
                        KernelIsa isa) {
  check(block, isa);
  for (int64_t b = 0, start = 0; start < n; ++b, start += block) {
    const int64_t len = n - start < block ? n - start : block;
    switch (isa) {
      case KernelIsa::kAvx512:
        quantize_avx512(x + start, len, q + start, scales + b);
        break;
      case KernelIsa::kAvx2:
        quantize_avx2(x + start, len, q + start, scales + b);
        break;
      case KernelIsa::kScalar:
        quantize_scalar(x + start, len, q + start, scales + b);
        break;
    }
  }
}

template <typename T, typename Avx512, typename Avx2>
void dequantize_blocks_of(const int8_t* q, const float* scales, int64_t n, int64_t block, T* out,
                          KernelIsa isa, Avx512 avx512, Avx2 avx2) {
  check(block, isa);
  for (int64_t b = 0, start = 0; start < n; ++b, start += block) {
    const int64_t len = n - start < block ? n - start : block;
    switch (isa) {
      case KernelIsa::kAvx512:
        avx512(q + start, len, scales[b], out + start);
        break;
      case KernelIsa::kAvx2:
        avx2(q + start, len, scales[b], out + start);
        break;
      case KernelIsa::kScalar:
        dequantize_scalar(q + start, len, scales[b], out + start);
        break;
    }
  }
}

// Whole blocks per at::parallel_for chunk (about 64 Ki elements each).
template <typename F>
void parallel_blocks(int64_t n, int64_t block, F f) {
  const int64_t blocks = quantize_blocks(n, block);
  const int64_t grain = block >= (1 << 16) ? 1 : (1 << 16) / block;
  at::parallel_for(0, blocks, grain, [&](int64_t b0, int64_t b1) {
    const int64_t start = b0 * block;
    const int64_t end = b1 * block < n ? b1 * block : n;
    f(b0, start, end - start);
  });
}

}  // namespace

void quantize_int8(const float* x, int64_t n, int64_t block, int8_t* q, float* scales,
                   KernelIsa isa) {
  quantize_blocks_of(x, n, block, q, scales, isa);
}

void quantize_int8_bf16(const uint16_t* x, int64_t n, int64_t block, int8_t* q, float* scales,
                        KernelIsa isa) {
  quantize_blocks_of(x, n, block, q, scales, isa);
}

void dequantize_int8(const int8_t* q, const float* scales, int64_t n, int64_t block, float* out,
                     KernelIsa isa) {
  dequantize_blocks_of(q, scales, n, block, out, isa, dequantize_avx512_f32, dequantize_avx2_f32);
}

void dequantize_int8_bf16(const int8_t* q, const float* scales, int64_t n, int64_t block,
                          uint16_t* out, KernelIsa isa) {
  dequantize_blocks_of(q, scales, n, block, out, isa, dequantize_avx512_bf16, dequantize_avx2_bf16);
}

Int8Blocks quantize_int8(const at::Tensor& x, int64_t block) {
  DS_CHECK(x.device().is_cpu() && x.is_contiguous() &&
               (x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16),
           Error, "int8 quantization needs a contiguous CPU tensor of float or bfloat16, got ",
           c10::toString(x.scalar_type()), " on ", x.device());
  DS_CHECK(block >= 1, Error, "int8 quantization: block size must be >= 1, got ", block);
  const int64_t n = x.numel();
  Int8Blocks out;
  out.block = block;
  out.values = at::empty({n}, x.options().dtype(at::kChar));
  out.scales = at::empty({quantize_blocks(n, block)}, x.options().dtype(at::kFloat));
  const KernelIsa isa = platform::kernel_isa();
  auto* q = out.values.data_ptr<int8_t>();
  auto* s = out.scales.data_ptr<float>();
  const bool bf16 = x.scalar_type() == at::kBFloat16;
  const void* data = x.data_ptr();
  parallel_blocks(n, block, [&](int64_t b, int64_t start, int64_t len) {
    if (bf16) {
      quantize_int8_bf16(static_cast<const uint16_t*>(data) + start, len, block, q + start, s + b,
                         isa);
    } else {
      quantize_int8(static_cast<const float*>(data) + start, len, block, q + start, s + b, isa);
    }
  });
  return out;
}

void dequantize_int8(const Int8Blocks& q, const at::Tensor& out) {
  DS_CHECK(q.values.scalar_type() == at::kChar && q.scales.scalar_type() == at::kFloat &&
               q.values.is_contiguous() && q.scales.is_contiguous(),
           Error, "int8 dequantization needs int8 values and float scales, contiguous");
  DS_CHECK(out.device().is_cpu() && out.is_contiguous() &&
               (out.scalar_type() == at::kFloat || out.scalar_type() == at::kBFloat16),
           Error, "int8 dequantization writes a contiguous CPU tensor of float or bfloat16, got ",
           c10::toString(out.scalar_type()));
  const int64_t n = q.values.numel();
  DS_CHECK(out.numel() == n && q.scales.numel() == quantize_blocks(n, q.block), Error,
           "int8 dequantization: ", n, " values in blocks of ", q.block, " need ",
           quantize_blocks(n, q.block), " scales and an output of ", n, " elements, got ",
           q.scales.numel(), " scales and ", out.numel(), " elements");
  const KernelIsa isa = platform::kernel_isa();
  const auto* values = q.values.data_ptr<int8_t>();
  const auto* scales = q.scales.data_ptr<float>();
  const bool bf16 = out.scalar_type() == at::kBFloat16;
  void* data = out.data_ptr();
  parallel_blocks(n, q.block, [&](int64_t b, int64_t start, int64_t len) {
    if (bf16) {
      dequantize_int8_bf16(values + start, scales + b, len, q.block,
                           static_cast<uint16_t*>(data) + start, isa);
    } else {
      dequantize_int8(values + start, scales + b, len, q.block, static_cast<float*>(data) + start,
                      isa);
    }
  });
}

}  // namespace deepshard::kernels
