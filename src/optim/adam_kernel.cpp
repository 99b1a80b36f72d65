// adam_step: the per-step constants of the Adam/AdamW update (DeepSpeed CPU Adam semantics, §5.2
// of docs/deepspeed-behavior.md), the choice of chunk kernel (platform::kernel_isa()) and the split
// of the array across intra-op threads. Threads get whole tiles of kTileNumel elements
// (at::parallel_for over tile indices), so every element is computed by the same vector code
// whatever the thread count, and only the array's last tile has a tail.
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>

#include "deepshard/util/error.h"
#include "optim/adam.h"
#include "optim/adam_chunk.h"
#include "platform/kernel_isa.h"

namespace deepshard::optim {
namespace {

// Elements per tile: large enough that thread start-up is amortised, small enough that two
// threads split a few-MB buffer.
constexpr int64_t kTileNumel = 1 << 16;

kernel::ChunkKernel chunk_kernel(platform::KernelIsa isa) {
  switch (isa) {
#if DS_X86_KERNELS
    case platform::KernelIsa::kAvx512:
      return kernel::adam_chunk_avx512;
    case platform::KernelIsa::kAvx2:
      return kernel::adam_chunk_avx2;
#endif
    default:
      return kernel::adam_chunk_scalar;
  }
}

}  // namespace

void adam_step(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
               const AdamHyper& hyper, double weight_decay, int64_t step, float grad_scale,
               uint16_t* param_bf16_out) {
  DS_ASSERT(step >= 1, "Adam step count is 1-based, got ", step);
  DS_ASSERT(n >= 0, "negative Adam element count ", n);
  const double bc1 = hyper.bias_correction ? 1.0 - std::pow(hyper.beta1, double(step)) : 1.0;
  const double bc2 = hyper.bias_correction ? 1.0 - std::pow(hyper.beta2, double(step)) : 1.0;
  const bool decay_on = weight_decay > 0.0;
  const kernel::StepConstants c{
      .beta1 = float(hyper.beta1),
      .one_minus_beta1 = float(1.0 - hyper.beta1),
      .beta2 = float(hyper.beta2),
      .one_minus_beta2 = float(1.0 - hyper.beta2),
      .step_size = float(-hyper.lr / bc1),
      .inv_sqrt_bc2 = float(1.0 / std::sqrt(bc2)),
      .eps = float(hyper.eps),
      .l2 = decay_on && !hyper.decoupled ? float(weight_decay) : 0.0f,
      .decay = decay_on && hyper.decoupled ? float(-hyper.lr * weight_decay) : 0.0f,
      .grad_scale = grad_scale,
  };
  const kernel::ChunkKernel run = chunk_kernel(platform::kernel_isa());
  const kernel::AdamArrays arrays{param, grad, exp_avg, exp_avg_sq, param_bf16_out};
  const int64_t tiles = (n + kTileNumel - 1) / kTileNumel;
  at::parallel_for(0, tiles, 1, [&](int64_t first_tile, int64_t end_tile) {
    const int64_t begin = first_tile * kTileNumel;
    const int64_t end = std::min(n, end_tile * kTileNumel);
    run(arrays.at(begin), end - begin, c);
  });
}

}  // namespace deepshard::optim
