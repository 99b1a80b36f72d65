// The pipeline step of a training run (docs/parallel.md, "Training with a pipeline"): with
// pipeline.stages > 1, this rank's stage of the model, any architecture (parallel::PipelineEngine
// over the model every rank built with train.seed; the other stages' parameters released and
// frozen, so the ZeRO engine flattens, reduces and updates this stage's only, over the
// data-parallel group), and each optimizer step's gradient_accumulation_steps micro-batches through
// the 1F1B schedule, every backward through the engine. The engine reduces the window's gradients
// at its boundary step, after every stage's backward sent its gradient, the tied embedding's two
// copies (first and last stage; only when the architecture ties its head to the embedding) summed
// first; its gradient norm sums the squares over the pipeline axis, the tied weight counted once
// (on the first stage). With tensor_parallel.size > 1 the stage is one of the tensor-parallel model
// (the architecture's, models/registry.h, split it first) and the norm sums over the replica's
// tensor x pipeline ranks (a group of its own), counting a parameter where it is split or on tensor
// rank 0, and the tied embedding on the first stage.
#include <torch/torch.h>

#include <algorithm>

#include "comm/transport_options.h"
#include "deepshard/util/error.h"
#include "train/training_run.h"
#include "util/log.h"

namespace deepshard::train {

void build_pipeline(TrainingRun& run) {
  const auto& pipeline = run.config.parallel.pipeline;
  if (pipeline.effective_stages() <= 1) return;
  // With tensor_parallel.size > 1 the model was split by its tensor-parallel wrapper first.
  run.pipe_links =
      std::make_unique<parallel::PipeLinks>(run.group, run.axes->grid, run.axis_options);
  run.pipeline = std::make_unique<parallel::PipelineEngine>(
      run.model, parallel::parse_partition_method(pipeline.partition), *run.pipe_links,
      *run.axes->pipeline, run.tensor_parallel.get());
  if (run.tensor_parallel) {
    // The replica's ranks (this data coordinate, every stage and tensor rank): the norm's group.
    const parallel::RankGrid& grid = run.axes->grid;
    parallel::GridCoord c = run.axes->coord;
    std::vector<int> members;
    for (c.pipeline = 0; c.pipeline < grid.pipeline_size(); ++c.pipeline) {
      for (c.tensor = 0; c.tensor < grid.tensor_size(); ++c.tensor) members.push_back(grid.rank(c));
    }
    std::sort(members.begin(), members.end());
    run.model_group = comm::create_subgroup(
        run.group, members, "model/" + std::to_string(run.axes->coord.data), run.axis_options);
  }
  if (run.rank0) {
    log::info("pipeline: ", pipeline.partition, " partition of ", run.model->num_layers(),
              " blocks over ", pipeline.stages, " stages: ", run.pipeline->partition().describe());
  }
}

void declare_pipeline(TrainingRun& run) {
  if (!run.pipeline) return;
  parallel::PipelineEngine* pipe = run.pipeline.get();
  const bool first_stage = run.axes->coord.pipeline == 0;
  // The head's tied embedding weight ("" when untied) is counted on the first stage only.
  const std::string tied = pipe->stage().tied_name();
  if (const models::TensorParallelModel* tp = run.tensor_parallel.get()) {
    const bool tensor_rank0 = run.axes->coord.tensor == 0;
    run.engine->set_model_parallel({run.model_group.get(), nullptr,
                                    [tp, first_stage, tensor_rank0, tied](const std::string& name) {
                                      return (tensor_rank0 || tp->is_split(name)) &&
                                             (first_stage || name != tied);
                                    }});
  } else {
    run.engine->set_model_parallel(
        {run.axes->pipeline.get(), [tied](const std::string& name) { return name == tied; }, {}});
  }
  zero::Engine* engine = run.engine.get();
  if (run.ds.zero.stage <= 1) {
    // Stages 0 and 1 reduce once, at the step: the tied sum runs first, on the engine's
    // accumulation buffer (fp32 under bf16: autograd's bf16 .grad was added there after every
    // backward).
    run.engine->reduce_at_step([pipe, engine] {
      pipe->reduce_tied_gradients(
          [engine](const std::string& name) { return engine->accumulated_grad(name); });
    });
  } else if (!tied.empty()) {
    // Stages 2 and 3 reduce (scatter) during every backward: the tied sum runs on the reduced
    // gradient, assembled whole over the data group and written back into each rank's pieces.
    run.engine->after_reduction([pipe, engine, tied] {
      at::Tensor whole;
      pipe->reduce_tied_gradients([engine, &whole](const std::string& name) {
        whole = engine->reduced_grad(name);
        return whole;
      });
      if (whole.defined()) engine->set_reduced_grad(tied, whole);
    });
  }
  // Each micro-batch's forward through the stage is one activation-checkpointing pass (its
  // regions recomputed in that micro-batch's backward, whatever 1F1B runs in between).
  pipe->set_forward_scope([&run](const std::function<at::Tensor()>& forward) {
    return run.activations->forward(forward);
  });
}

double pipeline_step(TrainingRun& run, int64_t step, StepRecord& r) {
  std::vector<parallel::MicroBatch> micro;
  for (int64_t m = 0; m < run.ds.gradient_accumulation_steps; ++m) {
    auto batch = run.data.sampler->batch(step, m);
    micro.push_back({batch.inputs, batch.targets});
  }
  zero::Engine& engine = *run.engine;
  auto t = Clock::now();
  const double loss =
      run.pipeline->train_batch(micro, [&engine](const at::Tensor& out, const at::Tensor& grad) {
        if (grad.defined()) {
          engine.backward(out, grad);
        } else {
          engine.backward(out);  // the last stage: the micro-batch's loss
        }
        // The boundary step (the tied sum, the reduction, the norm and the update) waits until
        // this stage's last backward has sent its gradient: after train_batch.
        if (!engine.is_gradient_accumulation_boundary()) engine.step();
      });
  // Forwards and backwards interleave (1F1B): the batch counts as backward time.
  r.backward_s = seconds_since(t);
  t = Clock::now();
  r.result = engine.step();
  r.optimizer_s = seconds_since(t);
  return loss;
}

namespace {

// Adds the pipeline's figures to every step's record (pipeline_bubble_fraction: the 1F1B
// schedule's idle share, (S - 1) / (M + S - 1); pipeline_comm_wait_share: the measured share of
// the step the ranks spent blocked on the pipeline's communication, their mean), and to
// summary.json (the partition, the bubble fraction, and the wait share per stage and overall,
// mean over the steps after the first).
class PipelineHook : public StepHook {
 public:
  void after_step(TrainingRun& run, StepRecord& step) override {
    if (!run.pipeline) return;
    step.metrics["pipeline_bubble_fraction"] = run.pipeline->bubble_fraction();
    step.metrics["pipeline_comm_wait_share"] = step.pipeline_wait_share;
    if (step.first) return;
    wait_share_sum_ += step.pipeline_wait_share;
    own_wait_share_sum_ += run.pipeline->comm_wait_seconds() / step.step_time;
    ++steps_;
  }

  void finish(TrainingRun& run) override {
    if (!run.pipeline) return;
    // Each stage's mean over its ranks (every rank adds its share at its stage's index).
    const parallel::RankGrid& grid = run.axes->grid;
    const int stages = grid.pipeline_size();
    at::Tensor by_stage = at::zeros({stages}, at::kDouble);
    if (steps_ > 0) by_stage[run.axes->coord.pipeline] = own_wait_share_sum_ / steps_;
    run.group.all_reduce(by_stage, comm::ReduceOp::kSum);
    by_stage /= static_cast<double>(run.group.size() / stages);
    for (int s = 0; s < stages; ++s) wait_by_stage_.push_back(by_stage[s].item<double>());
  }

  void add_to_summary(const TrainingRun& run, nlohmann::json& out) const override {
    if (!run.pipeline) return;
    out["pipeline"] = {{"stages", run.pipeline->partition().stages()},
                       {"partition_method", run.config.parallel.pipeline.partition},
                       {"partition", run.pipeline->partition().describe()},
                       {"micro_batches", run.ds.gradient_accumulation_steps},
                       {"bubble_fraction", run.pipeline->bubble_fraction()},
                       {"comm_wait_share", steps_ > 0 ? wait_share_sum_ / steps_ : 0.0},
                       {"comm_wait_share_by_stage", wait_by_stage_}};
  }

 private:
  double wait_share_sum_ = 0.0, own_wait_share_sum_ = 0.0;
  int64_t steps_ = 0;
  std::vector<double> wait_by_stage_;
};

}  // namespace

std::unique_ptr<StepHook> make_pipeline_hook() { return std::make_unique<PipelineHook>(); }

}  // namespace deepshard::train
