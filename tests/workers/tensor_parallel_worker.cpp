// Tensor-parallel GPT and Llama scenarios (tests/parallel/tensor_parallel_test.cpp), on real
// ranks. Every rank also runs the single-rank reference itself (gpt_reference.h: the whole model,
// the whole global batch), so the comparison is with the single-rank run step by step, in the same
// process.
#include "deepshard/models/parameter_shapes.h"
#include "models/gpt/memory.h"
#include "models/gpt/tensor_parallel.h"
#include "models/llama/tensor_parallel.h"
#include "parallel/grad_norm.h"
#include "parallel/model_parallel_counts.h"
#include "parallel/process_groups.h"
#include "workers/gpt_reference.h"

namespace deepshard::testing {
namespace {

// World = data x tensor (TENSOR ranks). Global batch 4 sequences per step, each data-parallel
// rank takes its rows; gradients averaged over the data group, clipped by the all-axes norm
// (MAX_NORM > 0), Adam on every rank's slices. Checks every step's loss and grad norm, and the
// gathered parameters at the end, against the single-rank run of `config`.
template <typename TensorParallel, typename Reference, typename Config>
void train_against_reference(comm::Group& group, const Config& config, int tensor_size, int steps,
                             double max_norm) {
  comm::GroupOptions options;
  options.timeout = std::chrono::milliseconds(worker_timeout_ms());
  const parallel::RankGrid grid(group.size(), 1, tensor_size);
  parallel::ParallelGroups groups = parallel::make_parallel_groups(group, grid, options);
  const int dp = grid.data_size(), dp_rank = groups.coord.data;
  const int64_t global_batch = 4;
  DS_WORKER_EXPECT(global_batch % dp == 0, "global batch " << global_batch << " over " << dp);

  Reference reference(config, global_batch, max_norm);
  TensorParallel tp(reference.fresh_model(), *groups.tensor);
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
  const auto gathered = tp.gather_full_parameters();
  DS_WORKER_EXPECT(gathered.size() == reference.num_parameter_tensors(),
                   gathered.size() << " parameters gathered");
  const double worst_param = reference.expect_parameters(gathered, steps);
  if (group.rank() == 0) {
    std::printf("grid: %s; worst loss relative difference %.3g, worst parameter difference %.3g\n",
                grid.describe().c_str(), reference.worst_loss(), worst_param);
  }
}

// args: TENSOR STEPS MAX_NORM. The tiny GPT (4 layers).
DS_WORKER_SCENARIO(tp_gpt_train) {
  train_against_reference<models::TensorParallelGpt, GptReference>(
      group, tiny_gpt(), std::stoi(args.at(0)), std::stoi(args.at(1)), std::stod(args.at(2)));
}

// args: TENSOR STEPS MAX_NORM untied|tied. The tiny Llama (2 layers, 4 query heads over 2
// key/value heads), its head untied or tied to the embeddings.
DS_WORKER_SCENARIO(tp_llama_train) {
  const bool tied = args.at(3) == "tied";
  train_against_reference<models::TensorParallelLlama, LlamaReference>(
      group, tiny_llama(2, tied), std::stoi(args.at(0)), std::stoi(args.at(1)),
      std::stod(args.at(2)));
}

// args: TENSOR KEY VALUE. Building the tensor-parallel Llama with model.KEY = VALUE (n_head,
// n_kv_head, intermediate_size or vocab_size) fails on every rank with the key named.
DS_WORKER_SCENARIO(tp_llama_refuses) {
  comm::GroupOptions options;
  options.timeout = std::chrono::milliseconds(worker_timeout_ms());
  const parallel::RankGrid grid(group.size(), 1, std::stoi(args.at(0)));
  parallel::ParallelGroups groups = parallel::make_parallel_groups(group, grid, options);
  models::LlamaConfig c = tiny_llama(1);
  const std::string key = args.at(1);
  const int64_t value = std::stoll(args.at(2));
  if (key == "n_head") c.n_head = value;
  if (key == "n_kv_head") c.n_kv_head = value;
  if (key == "intermediate_size") c.intermediate_size = value;
  if (key == "vocab_size") c.vocab_size = value;
  try {
    models::TensorParallelLlama tp(models::Llama(c, 1), *groups.tensor);
  } catch (const std::exception& e) {
    std::printf("refused: %s\n", e.what());
    return;
  }
  DS_WORKER_EXPECT(false, "model." << key << " " << value << " was not refused");
}

// The parameters this rank's slices hold.
int64_t held(models::CausalLmImpl& model) {
  int64_t n = 0;
  for (const auto& p : model.parameters()) n += p.numel();
  return n;
}

// args: TENSOR. The estimator's per-rank count (model_parallel_counts, from the configs alone)
// equals the elements this rank of a real tensor-parallel GPT and Llama (untied and tied) holds.
DS_WORKER_SCENARIO(tp_counts) {
  comm::GroupOptions options;
  options.timeout = std::chrono::milliseconds(worker_timeout_ms());
  const int tensor_size = std::stoi(args.at(0));
  const parallel::RankGrid grid(group.size(), 1, tensor_size);
  parallel::ParallelGroups groups = parallel::make_parallel_groups(group, grid, options);
  auto estimated = [&](const std::vector<models::NamedShape>& shapes, const std::string& tied,
                       const sharding::TensorPlan& plan) {
    return parallel::model_parallel_counts(shapes, tied, plan, "Block", tensor_size, 1,
                                           parallel::PartitionMethod::kUniform)
        .stage_params.at(0);
  };
  models::TensorParallelGpt gpt(models::Gpt(tiny_gpt(2), 1), *groups.tensor);
  const int64_t gpt_estimate =
      estimated(models::gpt_parameter_shapes(tiny_gpt(2)), "wte.weight", models::gpt_tensor_plan());
  DS_WORKER_EXPECT(held(gpt.causal_lm()) == gpt_estimate,
                   "GPT: " << held(gpt.causal_lm()) << " held, " << gpt_estimate << " estimated");
  for (bool tied : {false, true}) {
    const models::LlamaConfig c = tiny_llama(2, tied);
    models::TensorParallelLlama llama(models::Llama(c, 1), *groups.tensor);
    const int64_t estimate =
        estimated(models::llama_parameter_shapes(c), tied ? "model.embed_tokens.weight" : "",
                  models::llama_tensor_plan());
    DS_WORKER_EXPECT(held(llama.causal_lm()) == estimate,
                     "Llama: " << held(llama.causal_lm()) << " held, " << estimate << " estimated");
    if (group.rank() == 0) {
      std::printf("tensor %d: GPT %lld of %lld per rank, Llama (%s) %lld of %lld\n", tensor_size,
                  static_cast<long long>(gpt_estimate),
                  static_cast<long long>(models::gpt_parameter_count(tiny_gpt(2))),
                  tied ? "tied" : "untied", static_cast<long long>(estimate),
                  static_cast<long long>(models::llama_parameter_count(c)));
    }
  }
}

}  // namespace
}  // namespace deepshard::testing
