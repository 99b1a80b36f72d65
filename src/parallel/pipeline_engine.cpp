// PipelineEngine: one optimizer step's micro-batches through a model's stage in 1F1B order, the
// tied embedding's gradients summed, the all-stage gradient norm (pipeline_engine.h).
#include "parallel/pipeline_engine.h"

#include <torch/torch.h>

#include <chrono>
#include <cmath>

#include "deepshard/util/error.h"
#include "parallel/grad_norm.h"
#include "parallel/pipeline_schedule.h"
#include "util/stopwatch.h"

namespace deepshard::parallel {
namespace {

using Clock = std::chrono::steady_clock;

// Runs fn, adding its wall time to `seconds`.
template <typename Fn>
void timed(double& seconds, Fn&& fn) {
  const auto t0 = Clock::now();
  fn();
  seconds += util::seconds_since(t0);
}

}  // namespace

PipelineEngine::PipelineEngine(std::shared_ptr<models::CausalLmImpl> model, PartitionMethod method,
                               PipeLinks& links, comm::Group& pipeline,
                               models::TensorParallelModel* tensor)
    : partition_(partition_model(*model, method, links.stages())),
      stage_(std::move(model), partition_, links.stage(), tensor),
      links_(links),
      pipeline_(pipeline) {
  DS_ASSERT(pipeline.size() == links.stages() && pipeline.rank() == links.stage(),
            "pipeline group of ", pipeline.size(), " ranks for links of ", links.stages());
}

at::Tensor PipelineEngine::forward_micro(const MicroBatch& mb, at::Tensor& in, bool keep_graph) {
  if (links_.is_first()) {
    in = mb.idx;
  } else {
    const int64_t width = stage_.hidden_size();
    in = at::empty({mb.idx.size(0), mb.idx.size(1), width},
                   at::TensorOptions(stage_.parameters().front().scalar_type()));
    timed(wait_s_, [&] { links_.recv_activation(in); });
    if (keep_graph) in.requires_grad_(true);
  }
  auto run = [&] {
    at::Tensor out = stage_.forward(in);
    return links_.is_last() ? stage_.loss(out, mb.targets) : out;
  };
  at::Tensor out = keep_graph && forward_scope_ ? forward_scope_(run) : run();
  if (!links_.is_last()) links_.send_activation(out.detach().contiguous());
  return out;
}

double PipelineEngine::finish_batch(double loss_sum, int m) {
  at::Tensor loss = at::full({1}, loss_sum / m, at::kDouble);
  timed(wait_s_, [&] {
    links_.flush();
    pipeline_.broadcast(loss, links_.stages() - 1);
  });
  return loss.item<double>();
}

double PipelineEngine::train_batch(const std::vector<MicroBatch>& micro, const Backward& backward) {
  const int m = static_cast<int>(micro.size());
  DS_CHECK(m >= 1, Error, "pipeline train_batch: no micro-batches");
  bubble_ = parallel::bubble_fraction(links_.stages(), m);
  const auto t0 = Clock::now();
  wait_s_ = 0.0;
  // Per micro-batch: the stage's input (its gradient goes back) and its output (or the loss).
  std::vector<at::Tensor> inputs(m), outputs(m);
  double loss_sum = 0.0;
  for (const PipeStep& step : one_f_one_b(links_.stages(), links_.stage(), m)) {
    at::Tensor& in = inputs[step.micro];
    at::Tensor& out = outputs[step.micro];
    if (step.kind == PipeStep::kForward) {
      out = forward_micro(micro.at(step.micro), in, /*keep_graph=*/true);
      if (links_.is_last()) loss_sum += out.item<double>();
    } else {
      at::Tensor grad;
      if (!links_.is_last()) {
        grad = at::empty_like(out, at::MemoryFormat::Contiguous);
        timed(wait_s_, [&] { links_.recv_gradient(grad); });
      }
      if (backward) {
        backward(out, grad);
      } else if (links_.is_last()) {
        (out / m).backward();
      } else {
        out.backward(grad);
      }
      if (!links_.is_first()) links_.send_gradient(in.grad().contiguous());
      in = at::Tensor();
      out = at::Tensor();
    }
  }
  const double loss = finish_batch(loss_sum, m);
  if (!backward) reduce_tied_gradients();
  batch_s_ = util::seconds_since(t0);
  return loss;
}

double PipelineEngine::eval_batch(const std::vector<MicroBatch>& micro) {
  const int m = static_cast<int>(micro.size());
  DS_CHECK(m >= 1, Error, "pipeline eval_batch: no micro-batches");
  torch::NoGradGuard no_grad;
  const double train_wait = wait_s_;  // comm_wait_seconds() stays the last train_batch's
  double loss_sum = 0.0;
  for (const MicroBatch& mb : micro) {
    at::Tensor in;
    const at::Tensor out = forward_micro(mb, in, /*keep_graph=*/false);
    if (links_.is_last()) loss_sum += out.item<double>();
  }
  const double loss = finish_batch(loss_sum, m);
  wait_s_ = train_wait;
  return loss;
}

void PipelineEngine::reduce_tied_gradients(const GradOf& accumulated) {
  comm::Group* tied = links_.tied();
  if (tied == nullptr) return;
  timed(wait_s_, [&] {
    const at::Tensor weight = stage_.tied_weight();
    if (!weight.defined()) return;  // an untied head
    const at::Tensor grad = accumulated ? accumulated(stage_.tied_name()) : weight.grad();
    DS_ASSERT(grad.defined() && grad.is_contiguous(),
              "tied embedding without a contiguous gradient");
    tied->all_reduce(grad, comm::ReduceOp::kSum);
  });
}

double PipelineEngine::global_grad_norm() {
  double squares = 0.0;
  for (const auto& [name, p] : stage_.named_parameters()) {
    if (!p.grad().defined()) continue;
    // The tied embedding's two copies hold the same summed gradient: counted on the first stage.
    if (name == stage_.tied_name() && !links_.is_first()) continue;
    squares += at::linalg_vector_norm(p.grad(), 2, {}, false, at::kDouble).square().item<double>();
  }
  at::Tensor total = at::full({1}, squares, at::kDouble);
  pipeline_.all_reduce(total, comm::ReduceOp::kSum);
  return std::sqrt(total.item<double>());
}

double PipelineEngine::clip_grad_norm(double max_norm) {
  const double norm = global_grad_norm();
  scale_to_norm(stage_.parameters(), norm, max_norm);
  return norm;
}

}  // namespace deepshard::parallel
