// Pipeline-parallel GPT scenarios (tests/parallel/pipeline_test.cpp), on real ranks. Every rank
// also runs the single-rank reference itself (gpt_reference.h: the whole model, the whole global
// batch at once), so the comparison is with the single-rank run step by step, in the same process.
#include <chrono>
#include <csignal>
#include <thread>

#include "deepshard/util/error.h"
#include "parallel/pipeline_engine.h"
#include "parallel/process_groups.h"
#include "util/stopwatch.h"
#include "workers/gpt_reference.h"

namespace deepshard::testing {
namespace {

// args: STAGES METHOD LAYERS STEPS MICRO_BATCHES MAX_NORM. World = data x pipeline. Global batch
// 8 sequences per step; data-parallel replica d takes its rows and splits them into MICRO_BATCHES
// micro-batches (gradient accumulation) run through the 1F1B schedule; gradients averaged over the
// data group, clipped by the all-stage norm (MAX_NORM > 0), Adam on every stage's parameters.
// Checks every step's loss and grad norm, and every stage's parameters at the end, against the
// single-rank run.
DS_WORKER_SCENARIO(pp_gpt_train) {
  const int stages = std::stoi(args.at(0));
  const parallel::PartitionMethod method = parallel::parse_partition_method(args.at(1));
  const int64_t layers = std::stoll(args.at(2));
  const int steps = std::stoi(args.at(3));
  const int micro_batches = std::stoi(args.at(4));
  const double max_norm = std::stod(args.at(5));
  comm::GroupOptions options;
  options.timeout = std::chrono::milliseconds(worker_timeout_ms());
  const parallel::RankGrid grid(group.size(), stages, 1);
  parallel::ParallelGroups groups = parallel::make_parallel_groups(group, grid, options);
  parallel::PipeLinks links(group, grid, options);
  const int dp = grid.data_size(), dp_rank = groups.coord.data;
  const int64_t global_batch = 8;
  DS_WORKER_EXPECT(global_batch % (dp * micro_batches) == 0,
                   "global batch " << global_batch << " over " << dp << " x " << micro_batches);

  GptReference reference(tiny_gpt(layers), global_batch, max_norm);
  parallel::PipelineEngine pipe(reference.fresh_model().ptr(), method, links, *groups.pipeline);
  torch::optim::Adam opt = reference.make_optimizer(pipe.stage().parameters());

  double batch_s = 0.0, wait_s = 0.0;
  for (int step = 0; step < steps; ++step) {
    reference.step();
    opt.zero_grad();
    const int64_t rows = global_batch / dp, micro_rows = rows / micro_batches;
    std::vector<parallel::MicroBatch> micro;
    for (int i = 0; i < micro_batches; ++i) {
      const auto [idx, targets] = reference.rows(dp_rank * rows + i * micro_rows, micro_rows);
      micro.push_back({idx, targets});
    }
    const double loss = pipe.train_batch(micro);
    batch_s += pipe.batch_seconds();
    wait_s += pipe.comm_wait_seconds();
    DS_WORKER_EXPECT(
        pipe.comm_wait_seconds() >= 0 && pipe.comm_wait_seconds() <= pipe.batch_seconds(),
        "comm wait " << pipe.comm_wait_seconds() << " s of a " << pipe.batch_seconds()
                     << " s batch");
    for (const at::Tensor& p : pipe.stage().parameters()) {
      at::Tensor g = p.grad().contiguous();
      groups.data->all_reduce(g, comm::ReduceOp::kAvg);
      p.mutable_grad() = g;
    }
    const double norm = max_norm > 0 ? pipe.clip_grad_norm(max_norm) : 0.0;
    opt.step();

    at::Tensor mean_loss = at::full({1}, loss, at::kDouble);
    groups.data->all_reduce(mean_loss, comm::ReduceOp::kAvg);
    reference.expect_step(step + 1, mean_loss.item<double>(), norm, group.rank() == 0);
  }
  // This stage's parameters after training equal the reference's (the tied embedding's two
  // copies included: they stayed in sync).
  const double worst_param = reference.expect_parameters(pipe.stage().named_parameters(), steps);
  // Every parameter is held by exactly one stage, the tied embedding by two.
  at::Tensor held =
      at::full({1}, static_cast<double>(pipe.stage().named_parameters().size()), at::kDouble);
  groups.pipeline->all_reduce(held, comm::ReduceOp::kSum);
  const double want_held =
      static_cast<double>(reference.num_parameter_tensors()) + (stages > 1 ? 1 : 0);
  DS_WORKER_EXPECT(held.item<double>() == want_held,
                   "stages hold " << held.item<double>() << " parameters, want " << want_held);
  if (group.rank() == 0) {
    std::printf(
        "grid: %s; partition (%s): %s; bubble fraction %.4f; worst loss relative difference "
        "%.3g, worst parameter difference %.3g; rank 0 waited on the pipeline %.0f %% of its "
        "batches' time\n",
        grid.describe().c_str(), parallel::to_string(method).c_str(),
        pipe.partition().describe().c_str(), pipe.bubble_fraction(), reference.worst_loss(),
        worst_param, 100.0 * wait_s / batch_s);
  }
}

// A dead stage stops the job, named: 2 stages train one batch, then stage 1 is killed (SIGKILL)
// while stage 0 runs the next; stage 0's blocking receive fails with the transport's error
// (naming the link group and the lost rank) instead of hanging. Stage 0 ignores the launcher's
// SIGTERM so that it reports that error itself (as comm_worker's killed_in_collective does).
DS_WORKER_SCENARIO(pp_dead_stage) {
  comm::GroupOptions options;
  options.timeout = std::chrono::milliseconds(worker_timeout_ms());
  const parallel::RankGrid grid(group.size(), group.size(), 1);
  parallel::ParallelGroups groups = parallel::make_parallel_groups(group, grid, options);
  parallel::PipeLinks links(group, grid, options);
  GptReference reference(tiny_gpt(), 2, 0.0);
  parallel::PipelineEngine pipe(reference.fresh_model().ptr(), parallel::PartitionMethod::kUniform,
                                links, *groups.pipeline);
  reference.step();
  const auto [idx, targets] = reference.rows(0, 1);
  const std::vector<parallel::MicroBatch> micro{{idx, targets}, {idx, targets}};
  pipe.train_batch(micro);
  group.barrier();
  if (links.stage() == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // stage 0 is waiting
    std::raise(SIGKILL);
  }
  std::signal(SIGTERM, SIG_IGN);
  const auto start = std::chrono::steady_clock::now();
  try {
    pipe.train_batch(micro);
  } catch (const CommError& e) {
    const double seconds = util::seconds_since(start);
    std::printf("stage %d caught CommError after %.1f s: %s\n", links.stage(), seconds, e.what());
    std::fflush(stdout);
    throw;
  }
  throw std::runtime_error("a batch with a dead stage did not fail");
}

}  // namespace
}  // namespace deepshard::testing
