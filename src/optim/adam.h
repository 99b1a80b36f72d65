// Adam / AdamW on flat fp32 buffers (DeepSpeed's CPU Adam semantics,
// docs/deepspeed-behavior.md §5.2). One flat parameter buffer is described by ranges, each
// with its own weight decay (no decay for biases and norms). The optimizer owns exp_avg and
// exp_avg_sq for its buffer.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "deepshard/config/ds_config.h"

namespace deepshard::optim {

struct AdamHyper {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  bool decoupled = true;  // AdamW: p -= lr*wd*p; else L2: g += wd*p
  bool bias_correction = true;
};

// The kernel: one Adam step over n elements. grad is multiplied by grad_scale first (the fused
// unscale-and-clip factor, 1/combined_scale). `step` is the 1-based step count after this update.
// `param_bf16_out` (nullptr: none) receives the updated parameters as bf16 bit patterns in the
// same pass, rounded as torch's float -> bf16 conversion (nearest-even, NaN -> 0x7FC0). The
// instruction-set variant is platform::kernel_isa()'s (platform/kernel_isa.h: explicit AVX-512 and
// AVX2+FMA intrinsics, portable scalar code; the vector ones differ from the scalar one by the
// rounding of fused multiply-adds only); the result does not depend on the thread count.
void adam_step(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
               const AdamHyper& hyper, double weight_decay, int64_t step, float grad_scale,
               uint16_t* param_bf16_out = nullptr);

struct ParamRange {
  int64_t offset = 0;  // in the gradient and optimizer-state buffers
  int64_t numel = 0;
  double weight_decay = 0.0;
  // Where these elements are in the parameter buffer, when it is not `offset` (-1). Lets ZeRO
  // stages 1/2 in fp32 update the owned slices of the full parameter buffer in place.
  int64_t param_offset = -1;
};

class FlatAdam {
 public:
  // `numel`: size of the flat fp32 buffers this optimizer updates; `ranges` cover it (gaps are
  // padding and stay untouched).
  // `host_state` false: the optimizer keeps no exp_avg/exp_avg_sq of its own (they live elsewhere,
  // e.g. swapped to NVMe by sub-group) and is stepped with begin_step() + step_window().
  FlatAdam(const config::OptimizerConfig& config, int64_t numel, std::vector<ParamRange> ranges,
           bool host_state = true);

  // One step: param and grad are flat fp32 contiguous tensors of numel() (param: large enough for
  // every range's param_offset, when ranges give one). `lr` from the schedule.
  // `bf16_copy` (optional): a contiguous bf16 host tensor of numel() that receives the updated
  // parameters in the same pass (the ranges only; padding gaps are not written).
  void step(const at::Tensor& param, const at::Tensor& grad, double lr, float grad_scale,
            const at::Tensor& bf16_copy = {});

  // Sub-group stepping (ZeRO-Offload/Infinity): begin_step() once per optimizer step, then
  // step_window() for windows [lo, lo + n) that cover the buffer once. `param_buffer` and `grad`
  // are whole-buffer base pointers (as step()'s tensors); ranges without a param_offset take their
  // parameters from `param_window` instead (the window's own n elements, e.g. a swapped fp32
  // master), as do `exp_avg`, `exp_avg_sq` and `bf16_out` (nullable). Same arithmetic, element by
  // element, as step().
  void begin_step() { ++step_; }
  void step_window(int64_t lo, int64_t n, float* param_buffer, float* param_window,
                   const float* grad, float* exp_avg, float* exp_avg_sq, double lr,
                   float grad_scale, uint16_t* bf16_out = nullptr) const;

  int64_t step_count() const { return step_; }
  void set_step_count(int64_t step) { step_ = step; }
  at::Tensor& exp_avg() { return exp_avg_; }
  at::Tensor& exp_avg_sq() { return exp_avg_sq_; }
  int64_t numel() const { return numel_; }
  const std::vector<ParamRange>& ranges() const { return ranges_; }
  void set_beta1(double beta1) { hyper_.beta1 = beta1; }  // OneCycle momentum cycling
  void set_beta2(double beta2) { hyper_.beta2 = beta2; }  // OneCycle sets 0.99
  const AdamHyper& hyper() const { return hyper_; }

 private:
  AdamHyper hyper_;
  int64_t numel_;
  std::vector<ParamRange> ranges_;
  bool param_offsets_ = false;  // some range has a param_offset
  int64_t param_numel_ = 0;     // the parameter buffer's size: numel_, or what the ranges need
  at::Tensor exp_avg_, exp_avg_sq_;
  int64_t step_ = 0;
};

}  // namespace deepshard::optim
