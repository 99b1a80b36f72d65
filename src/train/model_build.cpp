// The model-building step of a training run: the GPT of the run's `model` section, built under
// zero.Init at stage 3, with Hugging Face weights (model.init_from), in the training dtype.
#include <torch/torch.h>

#include "deepshard/checkpoint/hf_gpt2.h"
#include "deepshard/util/log.h"
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

  // Mixed precision: parameters and activations in the low-precision dtype; the engine keeps the
  // fp32 master copy and gradient accumulation. libtorch 1.13 has no fp16 CPU kernels (layer
  // norm, matmul): on CPU an fp16 run keeps fp32 compute and only the loss scaling applies.
  const auto device = run.model->parameters().front().device();
  if (ds.bf16.enabled) run.model->to(torch::kBFloat16);
  if (ds.fp16.enabled && !device.is_cpu()) run.model->to(torch::kHalf);
  if (ds.fp16.enabled && device.is_cpu() && run.rank0)
    log::warn("fp16 on CPU: no fp16 kernels in libtorch 1.13; the model computes in fp32 with ",
              "fp16's dynamic loss scaling");
}

}  // namespace deepshard::train
