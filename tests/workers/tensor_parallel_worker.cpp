// Tensor-parallel GPT scenarios (tests/parallel/tensor_parallel_test.cpp), on real ranks. Every
// rank also runs the single-rank reference itself (gpt_reference.h: the whole model, the whole
// global batch), so the comparison is with the single-rank run step by step, in the same process.
#include "deepshard/parallel/grad_norm.h"
#include "deepshard/parallel/process_groups.h"
#include "deepshard/parallel/tensor_parallel_gpt.h"
#include "workers/gpt_reference.h"

namespace deepshard::testing {
namespace {

// args: TENSOR STEPS MAX_NORM. World = data x tensor. Global batch 4 sequences per step, each
// data-parallel rank takes its rows; gradients averaged over the data group, clipped by the
// all-axes norm (MAX_NORM > 0), Adam on every rank's slices. Checks every step's loss and grad
// norm, and the gathered parameters at the end, against the single-rank run.
DS_WORKER_SCENARIO(tp_gpt_train) {
  const int tensor_size = std::stoi(args.at(0));
  const int steps = std::stoi(args.at(1));
  const double max_norm = std::stod(args.at(2));
  comm::GroupOptions options;
  options.timeout = std::chrono::milliseconds(worker_timeout_ms());
  const parallel::RankGrid grid(group.size(), 1, tensor_size);
  parallel::ParallelGroups groups = parallel::make_parallel_groups(group, grid, options);
  const int dp = grid.data_size(), dp_rank = groups.coord.data;
  const int64_t global_batch = 4;
  DS_WORKER_EXPECT(global_batch % dp == 0, "global batch " << global_batch << " over " << dp);

  GptReference reference(tiny_gpt(), global_batch, max_norm);
  parallel::TensorParallelGpt tp(reference.fresh_model(), *groups.tensor);
  torch::optim::Adam tp_opt = reference.make_optimizer(tp.model()->parameters());

  for (int step = 0; step < steps; ++step) {
    reference.step();
    tp_opt.zero_grad();
    const int64_t rows = global_batch / dp;
    const auto [idx, targets] = reference.rows(dp_rank * rows, rows);
    const at::Tensor loss = tp.loss(idx, targets);
    loss.backward();
    for (const auto& p : tp.model()->parameters()) {
      at::Tensor g = p.grad().contiguous();
      groups.data->all_reduce(g, comm::ReduceOp::kAvg);
      p.mutable_grad() = g;
    }
    const double norm = max_norm > 0 ? parallel::clip_grad_norm(tp, max_norm) : 0.0;
    tp_opt.step();

    at::Tensor mean_loss = loss.detach().clone().reshape({1});
    groups.data->all_reduce(mean_loss, comm::ReduceOp::kAvg);
    reference.expect_step(step + 1, mean_loss.item<double>(), norm, group.rank() == 0);
  }
  // The whole parameters after training: gathered over the tensor group, equal to the reference.
  const double worst_param = reference.expect_parameters(tp.gather_full_parameters(), steps);
  if (group.rank() == 0) {
    std::printf("grid: %s; worst loss relative difference %.3g, worst parameter difference %.3g\n",
                grid.describe().c_str(), reference.worst_loss(), worst_param);
  }
}

}  // namespace
}  // namespace deepshard::testing
