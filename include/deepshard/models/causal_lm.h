// What the trainer, `deepshard generate` and the weight converters need from a decoder-only
// language model, whatever its architecture (GPT-2, Llama): logits for token ids, the training
// loss, sampling, its sizes and its sharding plan (deepshard/sharding/sharding_plan.h). An
// architecture implements forward(), sharding_plan() and its sizes; the rest is shared here.
#pragma once

#include <torch/nn/module.h>

#include <cstdint>
#include <string>
#include <vector>

#include "deepshard/sharding/sharding_plan.h"

namespace deepshard::models {

class CausalLmImpl : public torch::nn::Module, public sharding::Shardable {
 public:
  // [B, T] int64 token ids (T <= context_length()) -> logits [B, T, vocab_size()].
  virtual at::Tensor forward(const at::Tensor& idx) = 0;
  virtual int64_t context_length() const = 0;
  virtual int64_t vocab_size() const = 0;
  // The architecture's name, as the run config's model.arch spells it ("gpt", "llama").
  virtual std::string arch() const = 0;

  // Mean cross-entropy of forward(idx) against targets [B, T], computed in fp32 whatever the
  // parameter dtype (a bf16 log-softmax over the vocabulary loses too much precision).
  at::Tensor loss(const at::Tensor& idx, const at::Tensor& targets);

  // Samples `max_new_tokens` continuation tokens (no grad) on the host with a CPU generator
  // seeded by `seed` (reproducible on any device). top_k <= 0: no top-k filter; temperature <= 0:
  // greedy (argmax). The context is the last context_length() tokens.
  std::vector<int64_t> generate(const std::vector<int64_t>& prompt, int64_t max_new_tokens,
                                double temperature, int64_t top_k, uint64_t seed);

  // Distinct parameter elements (a tied weight counts once).
  int64_t num_parameters() const;

 protected:
  // True: loss() runs the fused cross-entropy kernel (kernels/fused_ops.h), which reads bf16
  // logits without an fp32 copy; false: libtorch's cross_entropy on fp32 logits.
  virtual bool fused_loss() const { return false; }
};

}  // namespace deepshard::models
