// Pipeline-parallel GPT scenarios (tests/parallel/pipeline_test.cpp), on real ranks. Every rank
// also runs the single-rank reference itself (the whole model, the whole global batch at once), so
// the comparison is with the single-rank run step by step, in the same process.
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdio>

#include "deepshard/parallel/pipeline_engine.h"
#include "deepshard/parallel/process_groups.h"
#include "workers/worker.h"

namespace deepshard::testing {
namespace {

// The tiny preset's shape (4 heads, 128 wide, byte vocabulary; `layers` blocks) on 32-token
// sequences.
models::GptConfig tiny(int64_t layers) {
  models::GptConfig c;
  c.n_layer = layers;
  c.n_head = 4;
  c.n_embd = 128;
  c.block_size = 32;
  c.vocab_size = 256;
  c.dropout = 0.0;
  return c;
}

double relative(double a, double b) { return std::abs(a - b) / std::max(std::abs(b), 1e-12); }

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
  const int64_t global_batch = 8, seq = 32;
  DS_WORKER_EXPECT(global_batch % (dp * micro_batches) == 0,
                   "global batch " << global_batch << " over " << dp << " x " << micro_batches);

  const uint64_t seed = 1234;
  models::Gpt reference(tiny(layers), seed);
  parallel::PipelineEngine pipe(models::Gpt(tiny(layers), seed), method, links, *groups.pipeline);
  const double lr = 3e-3;
  torch::optim::Adam ref_opt(reference->parameters(), torch::optim::AdamOptions(lr));
  torch::optim::Adam opt(pipe.stage().parameters(), torch::optim::AdamOptions(lr));

  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(99);
  double worst = 0.0;
  for (int step = 0; step < steps; ++step) {
    const at::Tensor tokens = at::randint(256, {global_batch, seq + 1}, gen, at::kLong);
    const at::Tensor idx = tokens.narrow(1, 0, seq), targets = tokens.narrow(1, 1, seq);

    ref_opt.zero_grad();
    const at::Tensor ref_loss = reference->loss(idx, targets);
    ref_loss.backward();
    const double ref_norm =
        max_norm > 0 ? torch::nn::utils::clip_grad_norm_(reference->parameters(), max_norm) : 0.0;
    ref_opt.step();

    opt.zero_grad();
    const int64_t rows = global_batch / dp, micro_rows = rows / micro_batches;
    std::vector<parallel::MicroBatch> micro;
    for (int i = 0; i < micro_batches; ++i) {
      const int64_t first = dp_rank * rows + i * micro_rows;
      micro.push_back({idx.narrow(0, first, micro_rows).contiguous(),
                       targets.narrow(0, first, micro_rows).contiguous()});
    }
    const double loss = pipe.train_batch(micro);
    for (const at::Tensor& p : pipe.stage().parameters()) {
      at::Tensor g = p.grad().contiguous();
      groups.data->all_reduce(g, comm::ReduceOp::kAvg);
      p.mutable_grad() = g;
    }
    const double norm = max_norm > 0 ? pipe.clip_grad_norm(max_norm) : 0.0;
    opt.step();

    at::Tensor mean_loss = at::full({1}, loss, at::kDouble);
    groups.data->all_reduce(mean_loss, comm::ReduceOp::kAvg);
    const double got = mean_loss.item<double>(), want = ref_loss.item<double>();
    if (group.rank() == 0) {
      std::printf("step %d loss %.7f reference %.7f grad_norm %.6f reference %.6f\n", step + 1, got,
                  want, norm, ref_norm);
    }
    worst = std::max(worst, relative(got, want));
    DS_WORKER_EXPECT(relative(got, want) < 1e-4,
                     "step " << step + 1 << ": loss " << got << " vs single rank " << want);
    if (max_norm > 0) {
      DS_WORKER_EXPECT(relative(norm, ref_norm) < 1e-4,
                       "step " << step + 1 << ": grad norm " << norm << " vs " << ref_norm);
    }
  }
  // This stage's parameters after training equal the reference's (the tied embedding's two
  // copies included, which shows they stayed in sync).
  auto ref_params = reference->named_parameters();
  double worst_param = 0.0;
  for (const auto& [name, p] : pipe.stage().named_parameters()) {
    const at::Tensor& want = ref_params[name];
    DS_WORKER_EXPECT(p.sizes() == want.sizes(), name << ": shape " << p.sizes());
    const double diff = (p - want).abs().max().item<double>();
    worst_param = std::max(worst_param, diff);
    // As in tensor_parallel_worker.cpp: Adam amplifies rounding of near-zero gradients up to lr
    // per step; bounded by a tenth of lr.
    DS_WORKER_EXPECT(diff < 0.1 * lr,
                     name << ": max difference " << diff << " after " << steps << " steps");
  }
  at::Tensor held =
      at::full({1}, static_cast<double>(pipe.stage().named_parameters().size()), at::kDouble);
  groups.pipeline->all_reduce(held, comm::ReduceOp::kSum);
  // Every parameter is held by exactly one stage, the tied embedding by two.
  const double want_held = static_cast<double>(ref_params.size()) + (stages > 1 ? 1 : 0);
  DS_WORKER_EXPECT(held.item<double>() == want_held,
                   "stages hold " << held.item<double>() << " parameters, want " << want_held);
  if (group.rank() == 0) {
    std::printf(
        "grid: %s; partition (%s): %s; bubble fraction %.4f; worst loss relative "
        "difference %.3g, worst parameter difference %.3g\n",
        grid.describe().c_str(), parallel::to_string(method), pipe.partition().describe().c_str(),
        pipe.bubble_fraction(), worst, worst_param);
  }
}

}  // namespace
}  // namespace deepshard::testing
