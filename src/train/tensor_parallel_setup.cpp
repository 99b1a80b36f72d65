// The tensor-parallel steps of a training run (docs/parallel.md): with tensor_parallel.size > 1 or
// pipeline.stages > 1, the rank grid's groups (one per axis, sub-groups of the job's group) and
// the data-parallel group the engine, zero.Init, the samplers and the batch arithmetic use, before
// the model is built; with tensor_parallel.size > 1, after it, the model split in place over this
// rank's tensor group
// (parallel::TensorParallelGpt or TensorParallelLlama; the pipeline's stage is
// pipeline_setup.cpp's). Without either nothing changes: the data group is the job's group and the
// loss the model's.
#include "deepshard/comm/transport_options.h"
#include "deepshard/models/gpt.h"
#include "deepshard/models/llama.h"
#include "deepshard/parallel/tensor_parallel_gpt.h"
#include "deepshard/parallel/tensor_parallel_llama.h"
#include "deepshard/util/error.h"
#include "train/training_run.h"

namespace deepshard::train {

void build_parallel_groups(TrainingRun& run) {
  const config::ParallelConfig& parallel = run.config.parallel;
  if (parallel.tensor_parallel.effective_size() <= 1 && parallel.pipeline.effective_stages() <= 1)
    return;
  comm::GroupOptions& options = run.axis_options;
  options.timeout =
      std::chrono::milliseconds(static_cast<int64_t>(run.config.comm.timeout_s * 1000));
  options.transport = comm::parse_transport(run.config.comm.transport, "comm.transport");
  run.axes = std::make_unique<parallel::ParallelGroups>(parallel::make_parallel_groups(
      run.group, parallel::grid_from_config(parallel, run.group.size()), options));
  run.data_group = run.axes->data.get();
}

void build_tensor_parallel(TrainingRun& run) {
  if (!run.axes || run.axes->grid.tensor_size() <= 1) return;
  // Every tensor rank built the model with train.seed (the single-rank initialisation), its
  // blocks split as they were built (run.tensor_build); each keeps its slices of the rest.
  comm::Group& tensor = *run.axes->tensor;
  const parallel::TensorSliceBuild* built = run.tensor_build.get();
  if (auto gpt = std::dynamic_pointer_cast<models::GptImpl>(run.model)) {
    run.tensor_parallel =
        std::make_unique<parallel::TensorParallelGpt>(models::Gpt(gpt), tensor, built);
  } else if (auto llama = std::dynamic_pointer_cast<models::LlamaImpl>(run.model)) {
    run.tensor_parallel =
        std::make_unique<parallel::TensorParallelLlama>(models::Llama(llama), tensor, built);
  } else {
    throw ConfigError("tensor_parallel.size " + std::to_string(run.axes->grid.tensor_size()) +
                      ": model.arch \"" + run.config.model.arch +
                      "\" is not split over tensor ranks");
  }
}

at::Tensor TrainingRun::loss(const at::Tensor& inputs, const at::Tensor& targets) {
  return tensor_parallel ? tensor_parallel->loss(inputs, targets) : model->loss(inputs, targets);
}

void declare_model_parallel(TrainingRun& run) {
  if (!run.tensor_parallel) return;
  parallel::TensorParallelModel* tp = run.tensor_parallel.get();
  run.engine->set_model_parallel(
      {run.axes->tensor.get(), [tp](const std::string& name) { return !tp->is_split(name); }, {}});
}

}  // namespace deepshard::train
