// Trains TinyLm (tiny_lm.h) with deepshard's engine from a DeepSpeed JSON config, in DeepSpeed's
// loop (engine.backward(loss), engine.step()), on synthetic token sequences. Run it under
// `deepshard launch -n 2 -- custom_model --deepspeed ds_config.json`.
//   --deepspeed FILE   the DeepSpeed config (any ZeRO stage; stage 3 builds the model under
//                      zero.Init, block by block)
//   --steps N          optimizer steps (default 20)
//   --seed S           model seed (each rank adds its rank: the engine makes rank 0's win)
//   --save DIR         save a checkpoint (tag "final") at the end
//   --load DIR         load the latest checkpoint of DIR before training
//   --report DIR       write DIR/rank<r>.json: per-step losses, the buffer and the frozen
//                      parameter before and after, the optimizer state in the memory ledger
#include <deepshard/comm/group.h>
#include <deepshard/comm/rendezvous.h>
#include <deepshard/config/loader.h>
#include <deepshard/zero/engine.h>
#include <deepshard/zero/partitioned_build.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tiny_lm.h"

namespace {

std::map<std::string, std::string> parse_args(int argc, char** argv) {
  std::map<std::string, std::string> args = {{"--steps", "20"}, {"--seed", "1"}};
  for (int i = 1; i + 1 < argc; i += 2) args[argv[i]] = argv[i + 1];
  return args;
}

// Micro-batch `micro` of step `step` on rank `rank`: [batch, context + 1] tokens that follow a
// simple rule with noise, so the loss has something to learn.
at::Tensor synthetic_batch(int64_t step, int rank, int64_t micro, int64_t batch,
                           const TinyLmOptions& o) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(1000003 * step + 1009 * rank + micro);
  at::Tensor start = torch::randint(0, o.vocab, {batch, 1}, gen, torch::kLong);
  at::Tensor stride = torch::randint(1, 4, {batch, 1}, gen, torch::kLong);
  at::Tensor tokens = (start + stride * torch::arange(o.context + 1)) % o.vocab;
  at::Tensor noise = torch::randint(0, o.vocab, tokens.sizes(), gen, torch::kLong);
  return torch::where(torch::rand(tokens.sizes(), gen) < 0.1, noise, tokens);
}

std::string json_list(const at::Tensor& t) {
  const at::Tensor flat = t.detach().to(at::kDouble).contiguous().view({-1});
  std::string out = "[";
  for (int64_t i = 0; i < flat.numel(); ++i) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%s%.9g", i ? "," : "", flat[i].item<double>());
    out += buf;
  }
  return out + "]";
}

}  // namespace

int main(int argc, char** argv) {
  using namespace deepshard;
  auto args = parse_args(argc, argv);
  auto group = comm::Group::create(comm::rendezvous_from_env(), std::chrono::seconds(120));
  const int rank = group->rank();
  const auto ds = config::load_ds_config(args.at("--deepspeed"), group->size());

  // Stage 3: zero.Init, each block partitioned as soon as it is built.
  const TinyLmOptions options;
  std::unique_ptr<zero::PartitionedBuild> build;
  if (ds.zero.stage == 3)
    build = std::make_unique<zero::PartitionedBuild>(*group,
                                                     ds.bf16.enabled ? at::kBFloat16 : at::kFloat);
  TinyLm model(options, std::stoull(args.at("--seed")) + rank,
               build ? build->unit_hook() : sharding::UnitBuilt());
  auto engine = zero::Engine::initialize(model.ptr(), ds, *group, build.get());
  if (args.count("--load")) engine->load_checkpoint(args.at("--load"));
  const at::Tensor frozen_before = model->positions.clone();

  std::vector<double> losses;
  for (int64_t step = 0; step < std::stoll(args.at("--steps")); ++step) {
    double loss_sum = 0;
    for (int64_t micro = 0; micro < ds.gradient_accumulation_steps; ++micro) {
      const at::Tensor batch = synthetic_batch(engine->global_steps(), rank, micro,
                                               ds.train_micro_batch_size_per_gpu, options);
      const at::Tensor inputs = batch.narrow(1, 0, options.context);
      const at::Tensor targets = batch.narrow(1, 1, options.context);
      at::Tensor loss = model->loss(inputs, targets);
      engine->backward(loss);
      engine->step();
      loss_sum += loss.item<double>();
    }
    // The step's loss: the mean over micro-batches and ranks.
    at::Tensor mean = torch::tensor({loss_sum / double(ds.gradient_accumulation_steps)});
    group->all_reduce(mean, comm::ReduceOp::kAvg);
    losses.push_back(mean.item<double>());
    if (rank == 0) std::printf("step %lld loss %.6f\n", (long long)step + 1, losses.back());
  }
  if (args.count("--save")) engine->save_checkpoint(args.at("--save"), "final");

  if (args.count("--report")) {
    std::ofstream out(args.at("--report") + "/rank" + std::to_string(rank) + ".json");
    out << "{\"losses\": " << json_list(torch::tensor(losses, torch::kDouble))
        << ", \"buffer\": " << json_list(model->channel_scale)
        << ", \"frozen_before\": " << json_list(frozen_before)
        << ", \"frozen_after\": " << json_list(model->positions)
        << ", \"frozen_numel\": " << model->positions.numel()
        << ", \"trainable_numel\": " << engine->num_parameters() << ", \"optimizer_state_bytes\": "
        << engine->ledger().bytes(zero::MemoryCategory::kOptimizerState) << "}\n";
  }
  return 0;
}
