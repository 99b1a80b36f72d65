// The pipeline engine (DeepSpeed's PipelineEngine.train_batch, below the trainer): one stage of a
// causal language model (pipeline_stage.h: any architecture) per rank of a pipeline group,
// driven through the 1F1B schedule (pipeline_schedule.h) over the micro-batches of one optimizer
// step. A forward receives the previous stage's activations (the first stage embeds the tokens),
// runs its blocks and sends the result on; the last stage computes the loss. A backward receives
// the gradient of its output (the last stage starts from its loss / M), backpropagates, and sends
// its input's gradient back. Gradients accumulate over the M micro-batches (each loss weighted 1/M:
// the mean over the global batch, as the single-rank run), then the two copies of the tied
// embedding (first and last stage) have their gradients summed (when the head is tied), so an
// optimizer step keeps them equal. The optimizer and the data-parallel reduction stay outside (the
// caller's, or a ZeRO engine's over the data group).
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "deepshard/comm/group.h"
#include "parallel/pipeline_p2p.h"
#include "parallel/pipeline_partition.h"
#include "parallel/pipeline_stage.h"

namespace deepshard::parallel {

struct MicroBatch {
  at::Tensor idx, targets;  // [B, T] int64 each; every stage gets them (only the shapes matter
                            // to the middle stages, the targets only to the last)
};

class PipelineEngine {
 public:
  // `model`: the whole model, built alike on every rank of the pipeline group (same seed), split
  // over the stages by `method` (partition_model). `links`: this rank's PipeLinks; `pipeline`: its
  // pipeline-axis group (loss and norm). `tensor`: the model is this rank's part of a
  // tensor-parallel model (the architecture's models::TensorParallelModel).
  PipelineEngine(std::shared_ptr<models::CausalLmImpl> model, PartitionMethod method,
                 PipeLinks& links, comm::Group& pipeline,
                 models::TensorParallelModel* tensor = nullptr);

  // How one micro-batch's backward runs: `output` is the stage's output and `grad` its gradient
  // received from the next stage; on the last stage `output` is the micro-batch's mean loss and
  // `grad` undefined (the loss's weight 1/M is the callee's: a ZeRO engine's backward(loss)
  // divides by gradient_accumulation_steps = M).
  using Backward = std::function<void(const at::Tensor& output, const at::Tensor& grad)>;

  // Forward and backward of every micro-batch in 1F1B order, accumulating into the stage's
  // gradients (zero them before). Returns the mean loss over the micro-batches, the same on every
  // stage (sent from the last). Collective over the pipeline.
  //  - Without `backward`: output.backward(grad) (the last stage (loss / M).backward()), then the
  //    tied gradients summed (reduce_tied_gradients()).
  //  - With it (a ZeRO engine's backward): the tied sum is the caller's, once every stage's
  //    backward has sent its gradient (Engine::reduce_at_step runs it before the reduction).
  double train_batch(const std::vector<MicroBatch>& micro, const Backward& backward = {});

  // Forward only (DeepSpeed's PipelineEngine.eval_batch): every micro-batch through the stages in
  // order, no gradients kept; returns the mean loss over them, the same on every stage.
  // Collective over the pipeline.
  double eval_batch(const std::vector<MicroBatch>& micro);

  // Wraps each micro-batch's forward through this stage (train_batch's): activation
  // checkpointing's pass (its regions are recomputed in that micro-batch's backward) and the
  // activation meter's window. Unset: the forward runs as is.
  using ForwardScope = std::function<at::Tensor(const std::function<at::Tensor()>& forward)>;
  void set_forward_scope(ForwardScope scope) { forward_scope_ = std::move(scope); }

  // Sums the gradients of the tied embedding's two copies over the first and last stage (nothing
  // on the others, nothing with an untied head); the time counts as the batch's comm wait.
  // `accumulated(name)`: where the tied parameter's gradient is accumulated (a ZeRO engine's
  // Engine::accumulated_grad: the fp32 buffer of a bf16 model, so the sum loses no precision);
  // without it, the parameter's .grad.
  using GradOf = std::function<at::Tensor(const std::string& name)>;
  void reduce_tied_gradients(const GradOf& accumulated = {});

  // The L2 norm of the whole model's gradients (every stage's squares summed over the pipeline
  // group, the tied embedding counted once) and clipping by it, as torch's clip_grad_norm_.
  // REQUIRES: gradients already reduced over the data axis. Collective over the pipeline group.
  double global_grad_norm();
  double clip_grad_norm(double max_norm);

  PipelineStage& stage() { return stage_; }
  const StagePartition& partition() const { return partition_; }
  // (S - 1) / (M + S - 1) for the last batch's M micro-batches.
  double bubble_fraction() const { return bubble_; }
  // The last train_batch's wall time and the part of it this stage spent waiting on the
  // pipeline's communication (blocking receives, the end-of-batch wait for its sends, the tied
  // all-reduce and the loss broadcast): the measured counterpart of the bubble fraction.
  double batch_seconds() const { return batch_s_; }
  double comm_wait_seconds() const { return wait_s_; }

 private:
  // One micro-batch's forward through this stage: `in` is set to the stage's input (the tokens on
  // the first stage, else received from the previous stage); returns the loss on the last stage,
  // else the output, which it sends on.
  at::Tensor forward_micro(const MicroBatch& mb, at::Tensor& in, bool keep_graph);
  // The batch's mean loss (micro-batches' loss sum / m on the last stage) once every send is
  // done, broadcast from the last stage.
  double finish_batch(double loss_sum, int m);

  StagePartition partition_;
  PipelineStage stage_;
  PipeLinks& links_;
  comm::Group& pipeline_;
  ForwardScope forward_scope_;
  double bubble_ = 0.0, batch_s_ = 0.0, wait_s_ = 0.0;
};

}  // namespace deepshard::parallel
