// What the trainer, `deepshard generate` and the weight converters need from a decoder-only
// language model, whatever its architecture (GPT-2, Llama): logits for token ids, the training
// loss, sampling, and its sizes. An architecture implements forward(); the rest is shared.
#pragma once

#include <torch/nn/module.h>

#include <cstdint>
#include <string>
#include <vector>

namespace deepshard::models {

class CausalLmImpl : public torch::nn::Module {
 public:
  // [B, T] int64 token ids (T <= context_length()) -> logits [B, T, vocab_size()].
  virtual at::Tensor forward(const at::Tensor& idx) = 0;
  virtual int64_t context_length() const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual std::string arch() const = 0;  // "gpt" or "llama": model.arch

  // Mean cross-entropy of forward(idx) against targets [B, T], computed in fp32.
  at::Tensor loss(const at::Tensor& idx, const at::Tensor& targets);

  // Samples `max_new_tokens` continuation tokens (no grad), on the host with a CPU generator
  // seeded by `seed` (reproducible on any device). temperature <= 0: greedy; top_k <= 0: no
  // top-k filter. The context is the last context_length() tokens.
  std::vector<int64_t> generate(const std::vector<int64_t>& prompt, int64_t max_new_tokens,
                                double temperature, int64_t top_k, uint64_t seed);

  // Distinct parameter elements (a tied weight counts once).
  int64_t num_parameters() const;
};

}  // namespace deepshard::models
