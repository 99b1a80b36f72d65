// One pipeline stage of a GPT (DeepSpeed's PipelineModule for models::Gpt): every rank builds the
// whole model with the same seed (the single-rank initialisation), then GptStage keeps only what
// its stage runs and releases the storage of every other parameter (left empty and frozen, so a
// ZeRO engine over the whole module takes the stage's parameters only):
//  - the first stage: wte and wpe (the embedding), then its blocks;
//  - the last stage: its blocks, then ln_f and the output head, tied to wte, so the last stage
//    holds its own copy of wte (DeepSpeed's TiedLayerSpec; the engine all-reduces the two copies'
//    gradients so they stay equal);
//  - a middle stage: its blocks only.
// Blocks run through the model's UnitCalls (as models::Gpt's forward runs them), so engines that
// wrap units keep working. Parameter names are models::Gpt's.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

#include "deepshard/models/gpt.h"
#include "deepshard/parallel/pipeline_partition.h"

namespace deepshard::parallel {

// The split of `model`'s blocks over `stages` stages by `method` (parameter counts from the
// model: embedding = wte + wpe, head = ln_f + the tied copy of wte).
StagePartition partition_gpt(models::Gpt& model, PartitionMethod method, int stages);

class GptStage {
 public:
  GptStage(models::Gpt model, const StagePartition& partition, int stage);

  bool is_first() const { return stage_ == 0; }
  bool is_last() const { return stage_ == stages_ - 1; }

  // First stage: idx [B, T] int64 -> hidden [B, T, C] (embedding, then its blocks). Others:
  // hidden [B, T, C] -> hidden [B, T, C] through its blocks.
  at::Tensor forward(const at::Tensor& input);
  // Last stage: mean cross-entropy of the head's logits for `hidden` against targets [B, T].
  at::Tensor loss(const at::Tensor& hidden, const at::Tensor& targets);

  // The parameters this stage holds (models::Gpt's names, in its order).
  const std::vector<std::pair<std::string, at::Tensor>>& named_parameters() const {
    return params_;
  }
  std::vector<at::Tensor> parameters() const;
  bool holds(const std::string& name) const;

  models::Gpt& model() { return model_; }

 private:
  models::Gpt model_;
  int stage_, stages_;
  int64_t block_begin_, block_end_;
  std::vector<std::pair<std::string, at::Tensor>> params_;
};

}  // namespace deepshard::parallel
