// Building blocks of the fused CPU kernels: DS_SIMD_KERNEL compiles a loop function three times,
// one per kernel instruction-set level (platform/kernel_isa.h: x86-64-v4 = AVX-512 F/BW/DQ/VL,
// x86-64-v3 = AVX2 + FMA, baseline x86-64), and runs the variant of platform::kernel_isa() at each
// call, so that a process (a test) can force any level its CPU supports (ISA levels, not CPU
// models: "arch=skylake-avx512" would name a model and never match an AMD CPU); the helpers below
// are written so that GCC vectorises them inside those loops (no branches, no libm calls): bf16 <->
// fp32 conversion as torch rounds it, a rational tanh and an exp. The loops are compiled with
// -ffast-math semantics (so that sums and maxima vectorise as reductions): the kernels never rely
// on infinities or NaNs (masked entries are skipped, not -inf).
//
//   DS_SIMD_KERNEL(forward_f32, (const float* x, float* y, int64_t n), (x, y, n)) { ...loop... }
//
// defines forward_f32(x, y, n); the body is an always-inlined function, copied into each variant.
#pragma once

#include <cstdint>
#include <cstring>

#include "platform/kernel_isa.h"

// Helpers called from DS_SIMD_KERNEL loops: always inlined, so they take the variant's ISA and
// flags (GCC does not inline across differing target/optimize attributes otherwise; for the same
// reason the loops use no std:: helpers such as std::max, which would stay out-of-line calls).
#define DS_SIMD_INLINE inline __attribute__((always_inline))

#if DS_X86_KERNELS && !defined(__clang__)
#define DS_SIMD_FLAGS __attribute__((optimize("O3", "fast-math")))
#define DS_SIMD_KERNEL(name, params, args)                                              \
  static DS_SIMD_INLINE DS_SIMD_FLAGS void name##_loop params;                          \
  static DS_TARGET_AVX512 DS_SIMD_FLAGS void name##_avx512 params { name##_loop args; } \
  static DS_TARGET_AVX2 DS_SIMD_FLAGS void name##_avx2 params { name##_loop args; }     \
  static DS_SIMD_FLAGS void name##_scalar params { name##_loop args; }                  \
  void name params {                                                                    \
    switch (::deepshard::platform::kernel_isa()) {                                      \
      case ::deepshard::platform::KernelIsa::kAvx512:                                   \
        return name##_avx512 args;                                                      \
      case ::deepshard::platform::KernelIsa::kAvx2:                                     \
        return name##_avx2 args;                                                        \
      case ::deepshard::platform::KernelIsa::kScalar:                                   \
        break;                                                                          \
    }                                                                                   \
    name##_scalar args;                                                                 \
  }                                                                                     \
  static DS_SIMD_INLINE DS_SIMD_FLAGS void name##_loop params
#else
#define DS_SIMD_KERNEL(name, params, args) void name params
#endif

namespace deepshard::kernels::simd {

DS_SIMD_INLINE float bf16_to_float(uint16_t v) {
  const uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Round to nearest even, as c10::BFloat16's constructor does (NaN stays a NaN).
DS_SIMD_INLINE uint16_t float_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  const uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((f != f ? (bits | 0x00400000u) : rounded) >> 16);
}

// tanh(x) as a 13/6 rational function on [-7.905, 7.905] (clamped outside, where tanh is ±1 in
// fp32); the coefficients are Eigen's (ptanh_float): within a few ulp of tanhf.
DS_SIMD_INLINE float tanh_fast(float x) {
  const float c = 7.90531110763549805f;
  x = x > c ? c : (x < -c ? -c : x);
  const float x2 = x * x;
  float p = -2.76076847742355e-16f;
  p = p * x2 + 2.00018790482477e-13f;
  p = p * x2 - 8.60467152213735e-11f;
  p = p * x2 + 5.12229709037114e-08f;
  p = p * x2 + 1.48572235717979e-05f;
  p = p * x2 + 6.37261928875436e-04f;
  p = p * x2 + 4.89352455891786e-03f;
  p = p * x;
  float q = 1.19825839466702e-06f;
  q = q * x2 + 1.18534705686654e-04f;
  q = q * x2 + 2.26843463243900e-03f;
  q = q * x2 + 4.89352518554385e-03f;
  return p / q;
}

// exp(x) for x <= 0 (softmax and log-sum-exp arguments after the max is subtracted): 2^n · p(r),
// n = round(x / ln 2), r = x - n ln 2 (two-part ln 2), p Cephes' degree-6 polynomial; inputs below
// -87 give 0. Within 2 ulp of expf on [-87, 0].
DS_SIMD_INLINE float exp_nonpositive(float x) {
  x = x < -87.0f ? -87.0f : (x > 0.0f ? 0.0f : x);
  const float n = __builtin_floorf(x * 1.44269504088896341f + 0.5f);
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

}  // namespace deepshard::kernels::simd
