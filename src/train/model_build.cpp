// The model-building step of a training run: the GPT of the run's `model` section, built under
// zero.Init at stage 3, with Hugging Face weights (model.init_from), in the training dtype.
#include <torch/torch.h>

#include "deepshard/checkpoint/hf_gpt2.h"
#include "train/training_run.h"

namespace deepshard::train {

void build_model(TrainingRun& run) {
  const auto& ds = run.ds;
  run.gpt_cfg = gpt_config(run.config.model);
  // Stage 3 builds the model under zero.Init (each block partitioned as soon as it exists), unless
  // Hugging Face weights are loaded into the full model afterwards. The blocks take the training
  // dtype as they are built (bf16; fp16 on CPU computes in fp32).
  if (ds.zero.stage == 3 && run.config.model.init_from.empty()) {
    run.zero_init = std::make_unique<zero::PartitionedBuild>(
        run.group, ds.bf16.enabled ? at::kBFloat16 : at::kFloat);
  }
  run.model =
      models::Gpt(run.gpt_cfg, run.config.train.seed,
                  run.zero_init ? run.zero_init->block_hook() : models::GptImpl::BlockBuilt());
  // Fine-tuning: Hugging Face GPT-2 weights replace the fresh init (every rank reads the file; the
  // engine then broadcasts rank 0's parameters anyway).
  if (!run.config.model.init_from.empty())
    checkpoint::load_gpt2_safetensors(run.model, run.config.model.init_from);

  // Mixed precision: the engine casts the model to the config's dtype (the dtype contract,
  // zero/engine.h) and keeps the fp32 master copy and gradient accumulation.
}

}  // namespace deepshard::train
