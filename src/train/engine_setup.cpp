// The engine step of a training run: the ZeRO engine around the built model, the model-state
// memory estimate (and its report, train.memory_report), and the start banner. The engine's call
// engine(input_ids, labels) is the run's loss (TrainingRun::loss): the training loop is
// DeepSpeed's (loss = engine(inputs, labels); engine.backward(loss); engine.step()).
#include <torch/torch.h>

#include <cstdio>

#include "train/memory_report.h"
#include "train/save_weights.h"
#include "train/training_run.h"
#include "util/log.h"

namespace deepshard::train {
namespace {

config::DType dtype_of(at::ScalarType type) {
  if (type == at::kBFloat16) return config::DType::kBf16;
  if (type == at::kHalf) return config::DType::kFp16;
  return config::DType::kFp32;
}

}  // namespace

void build_engine(TrainingRun& run) {
  const auto& ds = run.ds;
  if (run.config.train.save_weights) check_weights_savable(ds);  // before the training, not after
  run.engine = zero::Engine::initialize(run.model, ds, run.dp_group(), run.zero_init.get());
  // engine(input_ids, labels) is the run's loss (the task's, the tensor-parallel model's).
  run.engine->set_forward([&run](const at::Tensor& input_ids, const at::Tensor& labels) {
    return run.loss(input_ids, labels);
  });
  const auto& engine = *run.engine;
  run.estimate_in = zero::estimate_input(ds, engine.num_parameters(), run.dp_group().size(),
                                         dtype_of(run.model->parameters().front().scalar_type()));
  run.estimate_in.persistent_params = engine.persistent_parameters();
  run.estimate_in.largest_unit_params = engine.largest_unit_parameters();
  run.memory_estimate = zero::estimate_model_states(run.estimate_in);
  if (!run.rank0) return;
  if (run.config.train.memory_report) {
    std::printf("%s", format_memory_report(engine.ledger(), run.memory_estimate).c_str());
    std::fflush(stdout);
  }
  log::info("model ", run.config.model.arch, " ", run.config.model.preset, ": ",
            engine.num_parameters(), " parameters; ", run.group.size(), " rank(s); ZeRO stage ",
            ds.zero.stage, "; global batch ", ds.train_batch_size, " = ",
            ds.train_micro_batch_size_per_gpu, " x ", ds.gradient_accumulation_steps, " x ",
            run.dp_group().size(), " sequences of ", run.config.model.block_size, " tokens");
}

}  // namespace deepshard::train
