// The tensor-parallel steps of a training run (docs/parallel.md): with tensor_parallel.size > 1 or
// pipeline.stages > 1, the rank grid's groups (one per axis, sub-groups of the job's group) and
// the data-parallel group the engine, zero.Init, the samplers and the batch arithmetic use, before
// the model is built; with tensor_parallel.size > 1, after it, the model split in place over this
// rank's tensor group (its architecture's tensor-parallel model, models/registry.h; the pipeline's
// stage is pipeline_setup.cpp's). Without either nothing changes: the data group is the job's group
// and the loss the model's.
#include "comm/transport_options.h"
#include "deepshard/util/error.h"
#include "models/registry.h"
#include "models/tensor_parallel_model.h"
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
  const models::TensorSliceBuild* built = run.tensor_build.get();
  const models::ArchEntry& arch = models::find_arch(run.config.model.arch);
  DS_CHECK(arch.make_tensor_parallel != nullptr, ConfigError, "tensor_parallel.size ",
           run.axes->grid.tensor_size(), ": model.arch \"", arch.name,
           "\" is not split over tensor ranks");
  run.tensor_parallel = arch.make_tensor_parallel(run.model, tensor, built);
}

at::Tensor TrainingRun::loss(const at::Tensor& inputs, const at::Tensor& targets) {
  if (config.task.classification()) return model->classification_loss(inputs, targets);
  return tensor_parallel ? tensor_parallel->loss(inputs, targets) : model->loss(inputs, targets);
}

void declare_model_parallel(TrainingRun& run) {
  if (!run.tensor_parallel) return;
  models::TensorParallelModel* tp = run.tensor_parallel.get();
  run.engine->set_model_parallel(
      {run.axes->tensor.get(), [tp](const std::string& name) { return !tp->is_split(name); }, {}});
}

}  // namespace deepshard::train
