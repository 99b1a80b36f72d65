// FlatAdam: Adam/AdamW state (exp_avg, exp_avg_sq) for one flat fp32 buffer described by ranges,
// each with its own weight decay; steps it with the adam_step kernel.
#include <ATen/ATen.h>

#include <algorithm>

#include "optim/adam.h"
#include "deepshard/util/error.h"

namespace deepshard::optim {
namespace {

AdamHyper hyper_from(const config::OptimizerConfig& config) {
  DS_CHECK(config.type == "Adam" || config.type == "AdamW", ConfigError,
           "optimizer.type: FlatAdam implements Adam and AdamW, got \"", config.type, "\"");
  DS_CHECK(!config.amsgrad, ConfigError,
           "optimizer.params.amsgrad: the AMSGrad variant is not supported (as DeepSpeed's CPU "
           "and fused Adam)");
  AdamHyper hyper;
  hyper.lr = config.lr;
  hyper.beta1 = config.betas[0];
  hyper.beta2 = config.betas[1];
  hyper.eps = config.eps;
  hyper.decoupled = config.decoupled_weight_decay();
  hyper.bias_correction = config.bias_correction;
  return hyper;
}

void check_flat(const at::Tensor& t, const char* what, at::ScalarType dtype, int64_t numel) {
  DS_CHECK(t.defined() && t.scalar_type() == dtype && t.is_contiguous(), Error,
           "FlatAdam::step: ", what, " must be a contiguous ", c10::toString(dtype),
           " tensor, got ",
           t.defined() ? std::string(c10::toString(t.scalar_type())) : "undefined");
  DS_CHECK(t.numel() == numel, Error, "FlatAdam::step: ", what, " has ", t.numel(),
           " elements, the optimizer was built for ", numel);
  // The kernel dereferences raw pointers: the buffers must be in host memory.
  DS_CHECK(t.device().is_cpu(), Error, "FlatAdam::step: ", what,
           " must be in host memory for the CPU Adam kernel, got ", t.device().str());
}

}  // namespace

FlatAdam::FlatAdam(const config::OptimizerConfig& config, int64_t numel,
                   std::vector<ParamRange> ranges, bool host_state)
    : hyper_(hyper_from(config)), numel_(numel), ranges_(std::move(ranges)) {
  DS_CHECK(numel_ >= 0, Error, "FlatAdam: negative buffer size ", numel_);
  for (size_t i = 0; i < ranges_.size(); ++i) {
    const ParamRange& r = ranges_[i];
    DS_CHECK(r.offset >= 0 && r.numel >= 0 && r.offset + r.numel <= numel_, Error,
             "FlatAdam: range ", i, " [", r.offset, ", ", r.offset + r.numel,
             ") is outside the buffer of ", numel_, " elements");
    DS_CHECK(r.weight_decay >= 0.0, Error, "FlatAdam: range ", i, " has negative weight decay ",
             r.weight_decay);
    DS_CHECK(r.param_offset >= -1, Error, "FlatAdam: range ", i, " has parameter offset ",
             r.param_offset);
  }
  param_offsets_ = std::any_of(ranges_.begin(), ranges_.end(),
                               [](const ParamRange& r) { return r.param_offset >= 0; });
  param_numel_ = param_offsets_ ? 0 : numel_;
  for (const ParamRange& r : ranges_) {
    param_numel_ =
        std::max(param_numel_, (r.param_offset >= 0 ? r.param_offset : r.offset) + r.numel);
  }
  // Host buffers: the state lives where the CPU kernel runs (the fp32 master shard's home).
  if (!host_state) return;
  exp_avg_ = at::zeros({numel_}, at::TensorOptions().dtype(at::kFloat));
  exp_avg_sq_ = at::zeros({numel_}, at::TensorOptions().dtype(at::kFloat));
}

void FlatAdam::step_window(int64_t lo, int64_t n, float* param_buffer, float* param_window,
                           const float* grad, float* exp_avg, float* exp_avg_sq, double lr,
                           float grad_scale, uint16_t* bf16_out) const {
  DS_CHECK(lo >= 0 && n >= 0 && lo + n <= numel_, Error, "FlatAdam::step_window: [", lo, ", ",
           lo + n, ") is outside the buffer of ", numel_, " elements");
  DS_CHECK(step_ >= 1, Error, "FlatAdam::step_window: begin_step() was not called");
  AdamHyper hyper = hyper_;
  hyper.lr = lr;
  for (const ParamRange& r : ranges_) {
    const int64_t a = std::max(lo, r.offset), b = std::min(lo + n, r.offset + r.numel);
    if (a >= b) continue;
    DS_ASSERT((r.param_offset >= 0 ? param_buffer : param_window) != nullptr,
              "step_window: no parameter pointer for a range");
    float* p = r.param_offset >= 0 ? param_buffer + r.param_offset + (a - r.offset)
                                   : param_window + (a - lo);
    adam_step(p, grad + a, exp_avg + (a - lo), exp_avg_sq + (a - lo), b - a, hyper,
              r.weight_decay, step_, grad_scale, bf16_out ? bf16_out + (a - lo) : nullptr);
  }
}

void FlatAdam::step(const at::Tensor& param, const at::Tensor& grad, double lr, float grad_scale,
                    const at::Tensor& bf16_copy) {
  if (!param_offsets_) {
    check_flat(param, "param", at::kFloat, numel_);
  } else {
    check_flat(param, "param", at::kFloat, param.numel());
    DS_CHECK(param.numel() >= param_numel_, Error, "FlatAdam::step: param has ", param.numel(),
             " elements, the ranges need ", param_numel_);
  }
  check_flat(grad, "grad", at::kFloat, numel_);
  check_flat(exp_avg_, "exp_avg", at::kFloat, numel_);
  check_flat(exp_avg_sq_, "exp_avg_sq", at::kFloat, numel_);
  uint16_t* bf16 = nullptr;
  if (bf16_copy.defined()) {
    check_flat(bf16_copy, "bf16_copy", at::kBFloat16, numel_);
    // The kernel writes bf16 bit patterns (c10::BFloat16 is one uint16_t).
    bf16 = reinterpret_cast<uint16_t*>(bf16_copy.data_ptr<at::BFloat16>());
  }
  ++step_;
  AdamHyper hyper = hyper_;
  hyper.lr = lr;
  float* p = param.data_ptr<float>();
  const float* g = grad.data_ptr<float>();
  float* m = exp_avg_.data_ptr<float>();
  float* v = exp_avg_sq_.data_ptr<float>();
  for (const ParamRange& r : ranges_) {
    adam_step(p + (r.param_offset >= 0 ? r.param_offset : r.offset), g + r.offset, m + r.offset,
              v + r.offset, r.numel, hyper, r.weight_decay, step_, grad_scale,
              bf16 ? bf16 + r.offset : nullptr);
  }
}

}  // namespace deepshard::optim
