// The model-building step of a training run: the model of the run's `model` section (GPT or
// Llama), built under zero.Init at stage 3, with Hugging Face weights (model.init_from).
#include <torch/torch.h>

#include "deepshard/checkpoint/hf_weights.h"
#include "deepshard/train/model_factory.h"
#include "train/training_run.h"

namespace deepshard::train {

void build_model(TrainingRun& run) {
  const auto& ds = run.ds;
  // Stage 3 builds the model under zero.Init (each block partitioned as soon as it exists), unless
  // Hugging Face weights are loaded into the full model afterwards, or tensor parallelism splits
  // the whole model first (the engine then partitions this rank's slices over the data group).
  // The blocks take the training dtype as they are built (bf16; fp16 on CPU computes in fp32).
  if (ds.zero.stage == 3 && run.config.model.init_from.empty() &&
      run.config.parallel.tensor_parallel.effective_size() <= 1) {
    run.zero_init = std::make_unique<zero::PartitionedBuild>(
        run.group, ds.bf16.enabled ? at::kBFloat16 : at::kFloat);
  }
  run.model = make_model(run.config.model, run.config.train.seed,
                         run.zero_init ? run.zero_init->unit_hook() : sharding::UnitBuilt());
  // Fine-tuning: Hugging Face weights of the architecture replace the fresh init (every rank reads
  // the file; the engine then broadcasts rank 0's parameters anyway).
  if (!run.config.model.init_from.empty())
    checkpoint::load_hf_safetensors(*run.model, run.config.model.init_from);

  // Mixed precision: the engine casts the model to the config's dtype (the dtype contract,
  // zero/engine.h) and keeps the fp32 master copy and gradient accumulation.
}

}  // namespace deepshard::train
