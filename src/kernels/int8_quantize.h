// Block-wise symmetric int8 quantization, DeepSpeed's (ZeRO++'s quantized weights and gradients):
// the values are cut into blocks of `block` elements (the last one may be shorter); for each
// block with absolute maximum m,
//   scale = 2^8 / (2 m)              (1 when m is 0 or below FLT_MIN: such a block quantizes to 0)
//   q     = clamp(round_half_even(x * scale), -128, 127)
//   the block stores 1 / scale (m / 128), and dequantization is q * (1 / scale).
// So |x - dequantized| <= m / 256 (plus float rounding), except for values above 127.5 m / 128,
// which round to 128 and are clamped to 127 (error up to m / 128), as in DeepSpeed.
// REQUIRES: finite inputs (a block holding inf or NaN has unspecified values).
//
// Three implementations, one per kernel instruction-set level (platform/kernel_isa.h: AVX-512,
// AVX2, scalar), the tensor functions running platform::kernel_isa()'s. They give bit-identical
// results (one multiplication per element, the same rounding, an exact maximum), which
// tests/kernels/int8_quantize_test.cpp checks for every implementation this CPU can run against a
// plain reference.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "platform/kernel_isa.h"

namespace deepshard::kernels {

// Number of blocks (scales) for `n` elements.
inline int64_t quantize_blocks(int64_t n, int64_t block) { return (n + block - 1) / block; }

// Raw kernels on one thread. x: n elements (fp32, or bf16 bits); q: n int8; scales:
// quantize_blocks(n, block) floats (each block's 1 / scale). block >= 1. Throws Error when `isa`
// is not supported by this CPU or block < 1.
void quantize_int8(const float* x, int64_t n, int64_t block, int8_t* q, float* scales,
                   platform::KernelIsa isa);
void quantize_int8_bf16(const uint16_t* x, int64_t n, int64_t block, int8_t* q, float* scales,
                        platform::KernelIsa isa);
void dequantize_int8(const int8_t* q, const float* scales, int64_t n, int64_t block, float* out,
                     platform::KernelIsa isa);
void dequantize_int8_bf16(const int8_t* q, const float* scales, int64_t n, int64_t block,
                          uint16_t* out, platform::KernelIsa isa);

// A quantized tensor: values (int8, numel of the source) and scales (fp32, one per block).
struct Int8Blocks {
  at::Tensor values;
  at::Tensor scales;
  int64_t block = 0;
};

// Over the whole (contiguous) tensor, fp32 or bf16, blocks spread over at::parallel_for's
// threads, with platform::kernel_isa()'s implementation. Throws Error naming the dtype or the block
// otherwise.
Int8Blocks quantize_int8(const at::Tensor& x, int64_t block);
// Into `out` (fp32 or bf16, contiguous, numel of q.values).
void dequantize_int8(const Int8Blocks& q, const at::Tensor& out);

}  // namespace deepshard::kernels
