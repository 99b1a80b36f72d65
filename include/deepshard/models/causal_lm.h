// What the trainer, `deepshard generate`, the weight converters and the pipeline stages need from
// a language model, whatever its architecture (the GPT-2 and Llama decoders, the BERT encoder):
// its training objective on windows of a token file, logits for token ids
// as a stack of parts (embedding, layers, head), the training loss, sampling, its sizes and its
// sharding plan (deepshard/sharding/sharding_plan.h). An architecture implements the parts,
// sharding_plan() and its sizes; forward, loss and sampling are shared here.
#pragma once

#include <torch/nn/module.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "deepshard/sharding/sharding_plan.h"

namespace deepshard::models {

class CausalLmImpl : public torch::nn::Module, public sharding::Shardable {
 public:
  // [B, T] int64 token ids (T <= context_length()) -> logits [B, T, vocab_size()]:
  // head(run_layer(L - 1, ... run_layer(0, embed(idx)))) with L = num_layers().
  at::Tensor forward(const at::Tensor& idx);

  // The parts of forward(), which a pipeline stage runs a range of (parallel/pipeline_stage.h):
  //  - embed: idx [B, T] int64 -> hidden [B, T, hidden_size()] (checks idx: check_tokens);
  //  - run_layer(i, x): layer i (unit i of the sharding plan) as forward() runs it: inside the
  //    plan's unit calls (the wrappers engines install), through the layer runner when one is set
  //    (set_layer_runner), else the layer's own forward (layer_forward);
  //  - head: hidden [B, T, C] -> logits [B, T, vocab_size()] (the final norm and the output
  //    projection).
  virtual at::Tensor embed(const at::Tensor& idx) = 0;
  at::Tensor run_layer(int64_t i, const at::Tensor& x);
  virtual at::Tensor head(const at::Tensor& hidden) = 0;
  virtual int64_t num_layers() const = 0;
  virtual int64_t hidden_size() const = 0;
  // The names of the parameters embed() uses (the first pipeline stage holds them); every other
  // parameter outside the layers is the head's (a tied one, in the sharding plan, is both).
  virtual std::vector<std::string> embedding_parameters() const = 0;

  virtual int64_t context_length() const = 0;
  virtual int64_t vocab_size() const = 0;
  // The architecture's name, as the run config's model.arch spells it ("gpt", "llama").
  virtual std::string arch() const = 0;

  // The training objective on a window of the token file: `inputs` [B, T] and `targets` [B, T]
  // (the next tokens) as the sampler reads them, `sample_keys` [B] int64 (one per sample, a
  // function of the seed, the step and the sample's index in the global batch: the same whatever
  // the layout) -> what loss() takes, in place. A decoder predicts the next token (the window as
  // it is, this default); an encoder masks inputs and keeps the targets of the masked positions.
  virtual void make_objective(at::Tensor& inputs, at::Tensor& targets,
                              const at::Tensor& sample_keys) const {
    (void)inputs, (void)targets, (void)sample_keys;
  }

  // Mean cross-entropy of forward(idx) against targets [B, T], computed in fp32 whatever the
  // parameter dtype (a bf16 log-softmax over the vocabulary loses too much precision). Without
  // the fused loss (fused_loss()), targets of -100 are left out of the mean (libtorch's
  // ignore_index): an encoder's unmasked positions.
  at::Tensor loss(const at::Tensor& idx, const at::Tensor& targets);
  // The same loss from the last layer's hidden states [B, T, C] (what loss() computes after the
  // layers; a pipeline's last stage calls it): the head on every position, or, for a model that
  // predicts only some (predicts_every_position() false: an encoder's masked positions), on the
  // positions whose target is not -100 only. The mean is the same; the head's cost is the
  // predicted positions' (BERT at 15 %: the vocabulary projection 1/7 of it).
  at::Tensor head_loss(const at::Tensor& hidden, const at::Tensor& targets);
  // The same loss from logits [..., V] (what loss() computes after forward()).
  at::Tensor loss_of_logits(const at::Tensor& logits, const at::Tensor& targets);

  // Sequence classification (a classification task, config::TaskConfig): logits [B,
  // num_labels()] of idx [B, T] from the model's classification head; the default throws Error
  // naming arch() (no head). classification_loss: their mean cross-entropy against labels [B]
  // (each in [0, num_labels())), in fp32 whatever the parameter dtype.
  virtual at::Tensor classify(const at::Tensor& idx);
  virtual int64_t num_labels() const { return 0; }
  at::Tensor classification_loss(const at::Tensor& idx, const at::Tensor& labels);

  // False for a model that does not continue text (an encoder): generate() throws Error.
  virtual bool generates_text() const { return true; }

  // Samples `max_new_tokens` continuation tokens (no grad) on the host with a CPU generator
  // seeded by `seed` (reproducible on any device). top_k <= 0: no top-k filter; temperature <= 0:
  // greedy (argmax). The context is the last context_length() tokens.
  std::vector<int64_t> generate(const std::vector<int64_t>& prompt, int64_t max_new_tokens,
                                double temperature, int64_t top_k, uint64_t seed);

  // Throws Error (naming arch()) unless idx is [B, T] int64 with T <= context_length().
  void check_tokens(const at::Tensor& idx) const;

  // Distinct parameter elements (a tied weight counts once).
  int64_t num_parameters() const;

  // Runs layer i on x in run_layer's place, inside its unit call (a tensor-parallel model
  // installs its split forward of the layers here); null: the layer's own forward.
  using LayerRunner = std::function<at::Tensor(int64_t index, const at::Tensor& x)>;
  void set_layer_runner(LayerRunner runner) { layer_runner_ = std::move(runner); }

  // The calls of the sharding plan's units (run_layer runs layer i as unit i's call): an
  // architecture's sharding_plan() is built on them, and engines wrap them.
  sharding::UnitCalls& unit_calls() { return unit_calls_; }

 protected:
  // Layer i's own forward on x (what run_layer runs without a layer runner).
  virtual at::Tensor layer_forward(int64_t i, const at::Tensor& x) = 0;

  // True: loss() runs the fused cross-entropy kernel (kernels/fused_ops.h), which reads bf16
  // logits without an fp32 copy; false: libtorch's cross_entropy on fp32 logits.
  virtual bool fused_loss() const { return false; }

  // False: the objective predicts only the positions whose target is not -100 (head_loss runs the
  // head on those only).
  virtual bool predicts_every_position() const { return true; }

 private:
  LayerRunner layer_runner_;
  sharding::UnitCalls unit_calls_;
};

}  // namespace deepshard::models
