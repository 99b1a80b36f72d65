// The evaluation hook: mean validation loss every train.eval_interval steps and after the last
// step, when the run has data.valid (with a pipeline too: a forward-only pass of the stages); with
// a classification task the loss and accuracy over every validation passage.
#include <torch/torch.h>

#include "train/training_run.h"
#include "util/log.h"

namespace deepshard::train {
namespace {

// Mean validation loss over `batches` micro-batches per data-parallel rank (the same batches
// every time). With a pipeline they go through the stages forward only, the loss from the last.
double evaluate(TrainingRun& run, const data::DistributedSampler& sampler, int64_t batches) {
  torch::NoGradGuard no_grad;
  run.model->eval();
  double mean = 0.0;
  if (run.pipeline) {
    std::vector<parallel::MicroBatch> micro;
    for (int64_t i = 0; i < batches; ++i) {
      auto batch = sampler.batch(/*step=*/i, /*micro_step=*/0);
      micro.push_back({batch.inputs, batch.targets});
    }
    mean = run.pipeline->eval_batch(micro);
  } else {
    for (int64_t i = 0; i < batches; ++i) {
      auto batch = sampler.batch(/*step=*/i, /*micro_step=*/0);
      mean += run.loss(batch.inputs, batch.targets).item<double>();
    }
    mean /= static_cast<double>(batches);
  }
  run.model->train();
  return mean_over_ranks(run.group, mean);
}

class EvaluationHook : public StepHook {
 public:
  void after_step(TrainingRun& run, StepRecord& step) override {
    if (!run.data.valid_sampler) return;
    const int64_t interval = run.config.train.eval_interval;
    if (!(step.last || (interval > 0 && step.step % interval == 0))) return;
    if (run.data.valid_labels) {
      const ClassificationScore score = evaluate_classification(run);
      step.val_loss = score.loss;
      run.summary.final_val_loss = score.loss;
      run.summary.final_val_accuracy = score.accuracy;
      run.summary.majority_baseline = score.majority_baseline;
      step.metrics["val_loss"] = score.loss;
      step.metrics["val_accuracy"] = score.accuracy;
      step.metrics["majority_baseline"] = score.majority_baseline;
      if (run.rank0) {
        log::info("validation at step ", step.step, ": accuracy ", 100.0 * score.accuracy,
                  " % over ", score.passages, " passages (majority-class baseline ",
                  100.0 * score.majority_baseline, " %), loss ", score.loss);
      }
      return;
    }
    step.val_loss = evaluate(run, *run.data.valid_sampler, run.config.train.eval_batches);
    run.summary.final_val_loss = step.val_loss;
    step.metrics["val_loss"] = step.val_loss;
  }
};

}  // namespace

std::unique_ptr<StepHook> make_evaluation_hook() { return std::make_unique<EvaluationHook>(); }

}  // namespace deepshard::train
