// Private to src/optim: the per-chunk Adam kernels behind adam_step, one per instruction set, and
// what they share (the arrays, the per-step constants, torch's float -> bf16 rounding, staging of
// a vector tail). Every variant evaluates the same per-element formula, in this order (DeepSpeed's
// CPU Adam, §5.2): g = grad*grad_scale + l2*p; m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g;
// p = (p + decay*p) + step_size * m / (sqrt(v)*inv_sqrt_bc2 + eps). The vector variants fuse the
// multiply-adds (FMA), so they differ from the scalar one by rounding only.
#pragma once

#include <cstdint>
#include <cstring>

#include "platform/kernel_isa.h"

namespace deepshard::optim::kernel {

// Per-step constants, in the precision the kernels use.
struct StepConstants {
  float beta1, one_minus_beta1, beta2, one_minus_beta2;
  float step_size;     // -lr / (1 - beta1^t)
  float inv_sqrt_bc2;  // 1 / sqrt(1 - beta2^t)
  float eps;
  float l2;     // weight decay added to the gradient (Adam mode), else 0
  float decay;  // -lr * weight decay applied to the parameter (AdamW mode), else 0
  float grad_scale;
};

// The arrays of one update; param_bf16 may be null (no bf16 copy).
struct AdamArrays {
  float* param;
  const float* grad;
  float* exp_avg;
  float* exp_avg_sq;
  uint16_t* param_bf16;

  AdamArrays at(int64_t i) const {
    return {param + i, grad + i, exp_avg + i, exp_avg_sq + i,
            param_bf16 ? param_bf16 + i : nullptr};
  }
};

// Updates n elements in place (and writes the bf16 copy when asked).
using ChunkKernel = void (*)(const AdamArrays& a, int64_t n, const StepConstants& c);

void adam_chunk_scalar(const AdamArrays& a, int64_t n, const StepConstants& c);
#if DS_X86_KERNELS
void adam_chunk_avx2(const AdamArrays& a, int64_t n, const StepConstants& c);
void adam_chunk_avx512(const AdamArrays& a, int64_t n, const StepConstants& c);
#endif

// c10::BFloat16's round_to_nearest_even: NaN -> kBf16Nan, otherwise the top half of the bits
// after adding 0x7FFF plus the lowest kept bit.
constexpr uint16_t kBf16Nan = 0x7FC0;
inline uint16_t float_to_bf16(float x) {
  if (x != x) return kBf16Nan;
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return static_cast<uint16_t>((u + (((u >> 16) & 1u) + 0x7FFFu)) >> 16);
}

// A tail shorter than one vector, copied into zero-padded lane buffers so that the vector body
// runs on it unchanged (the padding lanes compute finite garbage that is never copied back).
template <int kLanes>
struct StagedTail {
  alignas(64) float param[kLanes] = {};
  alignas(64) float grad[kLanes] = {};
  alignas(64) float exp_avg[kLanes] = {};
  alignas(64) float exp_avg_sq[kLanes] = {};
  alignas(64) uint16_t param_bf16[kLanes] = {};

  StagedTail(const AdamArrays& a, int64_t n) {
    std::memcpy(param, a.param, n * sizeof(float));
    std::memcpy(grad, a.grad, n * sizeof(float));
    std::memcpy(exp_avg, a.exp_avg, n * sizeof(float));
    std::memcpy(exp_avg_sq, a.exp_avg_sq, n * sizeof(float));
  }
  AdamArrays arrays() { return {param, grad, exp_avg, exp_avg_sq, param_bf16}; }
  void copy_back(const AdamArrays& a, int64_t n) const {
    std::memcpy(a.param, param, n * sizeof(float));
    std::memcpy(a.exp_avg, exp_avg, n * sizeof(float));
    std::memcpy(a.exp_avg_sq, exp_avg_sq, n * sizeof(float));
    if (a.param_bf16) std::memcpy(a.param_bf16, param_bf16, n * sizeof(uint16_t));
  }
};

}  // namespace deepshard::optim::kernel
