// FlatParams: the trainable parameters of a module laid out in one flat parameter buffer and one
// flat gradient buffer. Every parameter's data becomes a view of its slice of the parameter
// buffer and its .grad a view of its slice of the gradient buffer, so autograd accumulates
// straight into the flat gradient buffer (AccumulateGrad adds in place into an existing grad),
// buckets are contiguous ranges of it, and the optimizer runs on whole flat buffers.
// Parameters are placed in reverse registration order: backward produces gradients roughly in
// that order, so consecutive buckets become ready one after another. Without a gradient buffer
// (stage 2) .grad is left to autograd: each backward allocates it per parameter, and the engine
// copies it out and releases it.
#pragma once

#include <torch/nn/module.h>

#include <functional>
#include <string>
#include <vector>

#include "optim/adam.h"

namespace deepshard::zero {

struct FlatParamEntry {
  std::string name;
  at::Tensor param;  // the model's parameter (its data now a view into the flat buffer)
  int64_t offset = 0;
  int64_t numel = 0;
  bool decay = true;  // weight decay applies (dim >= 2)
};

class FlatParams {
 public:
  // Takes every parameter of `module` with requires_grad (tied parameters once). Parameters must
  // share one dtype and device. `alignment`: the flat size is padded to a multiple of it.
  FlatParams(torch::nn::Module& module, int64_t alignment);

  // Where the parameters go: given their sizes in flat order, each one's offset (ascending, not
  // overlapping) and the buffer size. Gaps are padding (zero, never written by autograd).
  struct Placement {
    std::vector<int64_t> offsets;
    int64_t size = 0;
  };
  using Placer = std::function<Placement(const std::vector<int64_t>& numels)>;
  // `grad_buffer` false: no flat gradient buffer (grads() undefined, every .grad reset).
  FlatParams(torch::nn::Module& module, const Placer& place, bool grad_buffer = true);

  const std::vector<FlatParamEntry>& entries() const { return entries_; }
  const at::Tensor& params() const { return params_; }  // [padded_numel]
  const at::Tensor& grads() const { return grads_; }    // [padded_numel], or undefined
  int64_t numel() const { return numel_; }              // parameters only, without padding
  int64_t padded_numel() const { return params_.numel(); }

  // Optimizer ranges: each parameter with its weight decay (0 for no-decay parameters).
  std::vector<optim::ParamRange> ranges(double weight_decay) const;
  void zero_grads() {
    if (grads_.defined()) grads_.zero_();
  }
  // Mixed precision: adds the gradient buffer into `accumulator` (fp32, padded_numel()) and zeroes
  // the gradient buffer for the next backward.
  void accumulate_grads_into(const at::Tensor& accumulator);
  // Parameter `name`'s region of a buffer laid out as the flat buffers (`buffer`: padded_numel()
  // elements, e.g. the fp32 accumulation buffer), shaped as the parameter. Error for a name that
  // is not a flat parameter here.
  at::Tensor view_of(const at::Tensor& buffer, const std::string& name) const;

 private:
  std::vector<FlatParamEntry> entries_;
  at::Tensor params_, grads_;
  int64_t numel_ = 0;
};

}  // namespace deepshard::zero
