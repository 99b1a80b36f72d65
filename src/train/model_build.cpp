// The model-building step of a training run: the model of the run's `model` section (its
// architecture's registry entry), built under zero.Init at stage 3 and split over the tensor ranks
// as it is built, with Hugging Face weights (model.init_from).
#include <torch/torch.h>

#include "deepshard/train/model_factory.h"
#include "deepshard/util/error.h"
#include "models/hf_weights.h"
#include "models/registry.h"
#include "train/training_run.h"
#include "util/log.h"

namespace deepshard::train {

void build_model(TrainingRun& run) {
  const auto& ds = run.ds;
  // Stage 3 builds the model under zero.Init (each block partitioned over the data-parallel group
  // as soon as it exists), unless Hugging Face weights are loaded into the full model afterwards
  // or MiCS partitions it over shard groups, or a pipeline keeps this rank's stage of it (the
  // engine partitions the whole model's kept parameters then).
  // The blocks take the training dtype as they are built (bf16; fp16 on CPU computes in fp32).
  const bool whole_first = !run.config.model.init_from.empty() || ds.zero.mics_shard_size > 0 ||
                           run.config.parallel.pipeline.effective_stages() > 1;
  if (ds.zero.stage == 3 && !whole_first) {
    run.zero_init = std::make_unique<zero::PartitionedBuild>(
        run.dp_group(), ds.bf16.enabled ? at::kBFloat16 : at::kFloat);
  }
  sharding::UnitBuilt on_block = run.zero_init ? run.zero_init->unit_hook() : sharding::UnitBuilt();
  // Tensor parallelism: each block split over the tensor group as soon as it exists (before
  // zero.Init partitions this rank's slices), so no rank holds the whole model's blocks at once.
  if (run.axes && run.axes->grid.tensor_size() > 1 && !whole_first) {
    run.tensor_build = std::make_unique<models::TensorSliceBuild>(
        models::find_arch(run.config.model.arch).tensor_plan(), run.axes->tensor->rank(),
        run.axes->tensor->size(), std::move(on_block));
    on_block = run.tensor_build->unit_hook();
  }
  run.model = make_model(run.config.model, run.config.train.seed, on_block);
  if (run.tensor_build && run.rank0) {
    log::info(
        "tensor parallelism: the model's ", run.tensor_build->blocks(), " blocks split over the ",
        run.axes->tensor->size(), " tensor ranks as they were built (one whole block at a time, ",
        run.tensor_build->peak_whole_block_bytes(), " bytes)",
        run.zero_init ? ", then partitioned over the " + std::to_string(run.dp_group().size()) +
                            " data-parallel ranks (zero.Init)"
                      : std::string());
  }
  // Fine-tuning: Hugging Face weights of the architecture replace the fresh init (every rank reads
  // the file; the engine then broadcasts rank 0's parameters anyway).
  if (!run.config.model.init_from.empty()) {
    const std::vector<std::string> fresh =
        models::load_hf_safetensors(*run.model, run.config.model.init_from);
    if (run.rank0 && !fresh.empty()) {
      std::string names;
      for (const std::string& n : fresh) names += (names.empty() ? "" : ", ") + n;
      log::info("model.init_from: ", run.config.model.init_from, " has no ", names,
                "; freshly initialised (train.seed)");
    }
  }
  // A classification task needs the model's head of the label files' classes.
  if (run.config.task.classification()) {
    DS_CHECK(run.model->num_labels() == run.config.model.num_labels, ConfigError,
             "task.type \"classification\": model.arch \"", run.model->arch(),
             "\" has no classification head (bert has one)");
  }

  // Mixed precision: the engine casts the model to the config's dtype (the dtype contract,
  // zero/engine.h) and keeps the fp32 master copy and gradient accumulation.
}

}  // namespace deepshard::train
