// GPT-2's weight initialisation, deterministic for a seed (internal to the models layer).
#pragma once

#include <ATen/core/Generator.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <string>

namespace deepshard::models {

// Initialises every parameter of `model` (a GPT built of Linear, Embedding and LayerNorm modules):
// Linear and Embedding weights ~ normal(0, 0.02), weights of modules named "c_proj" ~ normal(0,
// 0.02 / sqrt(2 n_layer)), biases 0, LayerNorm weights 1. Values are drawn in fp32 from one CPU
// generator seeded with `seed`, parameter by parameter in named_parameters() order, then copied
// into the parameters (whatever their dtype and device): the same seed gives bit-identical weights
// on every rank and every run. Throws Error for a parameter outside this scheme.
void init_gpt2_weights(torch::nn::Module& model, int64_t n_layer, uint64_t seed);

// The same, part by part: init(module, prefix) for the model's top-level modules in registration
// order (wte, wpe, h.0 ... ln_f) draws exactly what init_gpt2_weights draws for them, so a model
// can be initialised (and each block handed on) while it is being built.
class Gpt2Init {
 public:
  Gpt2Init(int64_t n_layer, uint64_t seed);
  // Initialises every parameter of `module`, whose names in the model start with `prefix`.
  void init(torch::nn::Module& module, const std::string& prefix);

 private:
  int64_t n_layer_;
  at::Generator gen_;
};

}  // namespace deepshard::models
