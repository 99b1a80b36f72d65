// Distributed sampler over a token file: every optimizer step draws a global batch of
// train_batch_size windows of block_size + 1 tokens, at start offsets chosen by a
// deterministic hash of (seed, step, sample index) — so the global batch of a step is the same
// whatever the number of ranks, and any step can be produced directly (resume at any step).
// Sample g of a step goes to rank g / (micro * gas) ... see global_index(): the global batch is
// split rank-major, then by micro-step, then by position in the micro-batch.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>

#include "data/label_file.h"
#include "data/token_file.h"

namespace deepshard::data {

struct Batch {
  at::Tensor inputs;  // [micro, block_size] int64
  // [micro, block_size] int64 (inputs shifted by one); from passages: [micro] int64, the classes.
  at::Tensor targets;
  // [micro] int64: each sample's key, a hash of (seed, step, global sample index) distinct from
  // its offset's, for an objective that draws per sample (masked-LM) alike in every layout.
  at::Tensor sample_keys;
};

class DistributedSampler {
 public:
  DistributedSampler(const TokenFile& file, int64_t block_size, int64_t micro_batch,
                     int64_t grad_accum_steps, int rank, int world_size, uint64_t seed);
  // The micro-batch of this rank for optimizer step `step` and micro-step `micro_step`, through
  // the objective when one is set.
  Batch batch(int64_t step, int64_t micro_step) const;
  // What batch() applies to each window before returning it (the model's training objective,
  // models::CausalLmImpl::make_objective); unset: the windows as read.
  using Objective = std::function<void(Batch&)>;
  void set_objective(Objective objective) { objective_ = std::move(objective); }
  // Classification: every sample is a window of block_size tokens inside a passage of `labels`
  // (read_label_file, checked against the file with check_labels_match; it must outlive the
  // sampler), its target the passage's class; null: windows anywhere in the file.
  void set_passages(const LabelFile* labels) { passages_ = labels; }
  // From passages: the passage of global sample `index` of `step` and the window's first token.
  struct PassageWindow {
    int64_t passage = 0, start = 0;
  };
  PassageWindow passage_window(int64_t step, int64_t index) const;
  // Index of the sample within the global batch of a step.
  int64_t global_index(int rank, int64_t micro_step, int64_t position) const;
  // Start offset (in tokens) of global sample `index` of `step`.
  int64_t sample_offset(int64_t step, int64_t index) const;
  // The key of global sample `index` of `step` (Batch::sample_keys).
  int64_t sample_key(int64_t step, int64_t index) const;

 private:
  const TokenFile& file_;
  int64_t block_size_, micro_batch_, grad_accum_steps_;
  int rank_, world_size_;
  uint64_t seed_;
  Objective objective_;
  const LabelFile* passages_ = nullptr;
};

}  // namespace deepshard::data
