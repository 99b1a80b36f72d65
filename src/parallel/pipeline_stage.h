// One pipeline stage of a causal language model (DeepSpeed's PipelineModule on one stage), for any
// architecture through the parts models::CausalLmImpl declares (embed, run_layer, head). Every
// rank builds the whole model with the same seed (the single-rank initialisation), then the stage
// keeps only what it runs and releases the storage of every other parameter (left empty and
// frozen, so a ZeRO engine over the whole module takes the stage's parameters only):
//  - the first stage: the embedding (the model's embedding_parameters()), then its layers;
//  - the last stage: its layers, then the final norm and the head. A head tied to the embedding
//    (the sharding plan's tied parameter) makes the last stage hold its own copy of it (DeepSpeed's
//    TiedLayerSpec; the engine sums the two copies' gradients so they stay equal);
//  - a middle stage: its layers only.
// Layers run as the model's forward runs them (run_layer: its unit calls and layer runner), so
// engines that wrap units keep working. A stage of a tensor-parallel model (`tensor`: the model
// was split by its architecture's models::TensorParallelModel) runs that model's
// vocabulary-parallel embedding and head loss, and its layers through the runner it installed.
// Parameter names are the model's.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "deepshard/models/causal_lm.h"
#include "models/tensor_parallel_model.h"
#include "parallel/pipeline_partition.h"

namespace deepshard::parallel {

// `model`'s layer specs for the split: [embedding, layers..., head] with their layer types
// ("Embedding", the layer module's class such as "Block" or "LlamaBlock", "Head") and parameter
// counts (the head: the final norm and head plus the tied embedding weight again, since the last
// stage holds a copy).
PipelineItems pipeline_items(models::CausalLmImpl& model);

// The split of `model`'s layers over `stages` stages by `method` (partition_items of
// pipeline_items(model)).
StagePartition partition_model(models::CausalLmImpl& model, const PartitionMethod& method,
                               int stages);

class PipelineStage {
 public:
  // `model`: whole (or split by `tensor`), the same on every rank of the pipeline.
  PipelineStage(std::shared_ptr<models::CausalLmImpl> model, const StagePartition& partition,
                int stage, models::TensorParallelModel* tensor = nullptr);

  int stage() const { return stage_; }
  bool is_first() const { return stage_ == 0; }
  bool is_last() const { return stage_ == partition_.stages() - 1; }
  const StagePartition& partition() const { return partition_; }

  // First stage: idx [B, T] int64 -> hidden [B, T, C] (embedding, then its layers). Others:
  // hidden [B, T, C] -> hidden [B, T, C] through its layers.
  at::Tensor forward(const at::Tensor& input);
  // Last stage: mean cross-entropy of the head's logits for `hidden` against targets [B, T], as
  // the model's loss computes it.
  at::Tensor loss(const at::Tensor& hidden, const at::Tensor& targets);
  int64_t hidden_size() const { return model_->hidden_size(); }

  // The parameters this stage holds (the model's names, in its order).
  const std::vector<std::pair<std::string, at::Tensor>>& named_parameters() const {
    return params_;
  }
  std::vector<at::Tensor> parameters() const;
  bool holds(const std::string& name) const;

  // The embedding weight the head is tied to ("" when the head is untied): the first and the
  // last stage hold a copy each.
  const std::string& tied_name() const { return tied_; }
  // This stage's copy of it; undefined when untied or on a middle stage.
  at::Tensor tied_weight() const;

  models::CausalLmImpl& model() { return *model_; }

 private:
  std::shared_ptr<models::CausalLmImpl> model_;
  models::TensorParallelModel* tensor_;
  StagePartition partition_;
  int stage_;
  std::string tied_;
  std::vector<std::pair<std::string, at::Tensor>> params_;
};

}  // namespace deepshard::parallel
