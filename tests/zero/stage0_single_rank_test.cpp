// The stage-0 engine on one rank against plain libtorch training of the same model on the same
// batches: torch::optim::AdamW with decay on matrices only, clip_grad_norm_, gradient
// accumulation by loss division. The two must agree step by step.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "deepshard/comm/group.h"
#include "deepshard/models/gpt.h"
#include "deepshard/zero/engine.h"

namespace deepshard::zero {
namespace stage0_single_rank_test {

models::GptConfig stage0_tiny() {
  models::GptConfig c;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 32;
  c.block_size = 16;
  c.vocab_size = 64;
  return c;
}

config::DsConfig ds_config(int64_t micro, int64_t gas, double clip) {
  config::DsConfig c;
  c.train_micro_batch_size_per_gpu = micro;
  c.gradient_accumulation_steps = gas;
  c.train_batch_size = micro * gas;
  c.gradient_clipping = clip;
  c.optimizer.type = "AdamW";
  c.optimizer.lr = 3e-3;
  c.optimizer.betas = {0.9, 0.95};
  c.optimizer.eps = 1e-8;
  c.optimizer.weight_decay = 0.1;
  c.zero.reduce_bucket_size = 1000;  // several buckets
  return c;
}

std::pair<at::Tensor, at::Tensor> batch(int64_t step, int64_t micro, int64_t size) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(1000 + step * 10 + micro);
  auto x = torch::randint(0, 64, {size, 17}, gen, torch::kLong);
  return {x.narrow(1, 0, 16).contiguous(), x.narrow(1, 1, 16).contiguous()};
}

void expect_matches_libtorch(int64_t gas, double clip) {
  const int64_t micro = 4, steps = 8;
  auto group = comm::Group::create(comm::RendezvousInfo{}, std::chrono::seconds(10));

  models::Gpt ours(stage0_tiny(), 7);
  auto engine = Engine::initialize(ours.ptr(), ds_config(micro, gas, clip), *group);

  models::Gpt ref(stage0_tiny(), 7);
  std::vector<at::Tensor> decay, no_decay, all;
  for (auto& p : ref->parameters()) {
    (p.dim() >= 2 ? decay : no_decay).push_back(p);
    all.push_back(p);
  }
  std::vector<torch::optim::OptimizerParamGroup> groups;
  auto opts = [](double wd) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(3e-3).betas({0.9, 0.95}).eps(1e-8).weight_decay(wd));
  };
  groups.emplace_back(decay, opts(0.1));
  groups.emplace_back(no_decay, opts(0.0));
  torch::optim::AdamW adamw(groups, torch::optim::AdamWOptions(3e-3));

  bool clipped = false;
  for (int64_t step = 0; step < steps; ++step) {
    double ours_loss = 0, ref_loss = 0;
    adamw.zero_grad();
    for (int64_t m = 0; m < gas; ++m) {
      auto [x, y] = batch(step, m, micro);
      auto loss = ours->loss(x, y);
      engine->backward(loss);
      auto result = engine->step();
      ours_loss += loss.item<double>();
      auto rloss = ref->loss(x, y);
      (rloss / static_cast<double>(gas)).backward();
      ref_loss += rloss.item<double>();
      if (result.boundary && clip > 0 && result.grad_norm > clip) {
        clipped = true;
      }
    }
    if (clip > 0) torch::nn::utils::clip_grad_norm_(all, clip);
    adamw.step();
    EXPECT_NEAR(ours_loss, ref_loss, 1e-5 * std::abs(ref_loss)) << "step " << step;
  }
  if (clip > 0) {
    EXPECT_TRUE(clipped) << "the clip threshold never took effect";
  }
  // Parameters after the last update agree too. The key part of c_attn's bias gets a gradient
  // that is zero up to rounding (a constant added to every key does not change the softmax), and
  // Adam amplifies that noise to steps of size lr: it is compared with an lr-sized tolerance.
  auto ours_params = ours->named_parameters();
  for (const auto& item : ref->named_parameters()) {
    const bool noise_only = item.key().find("c_attn.bias") != std::string::npos;
    const double atol = noise_only ? 3e-3 * steps : 1e-6;
    EXPECT_TRUE(torch::allclose(ours_params[item.key()], item.value(), 1e-4, atol))
        << item.key() << ": max difference "
        << (ours_params[item.key()] - item.value()).abs().max().item<double>();
  }
}

TEST(Stage0SingleRank, MatchesLibtorchAdamW) { expect_matches_libtorch(1, 0.0); }
TEST(Stage0SingleRank, MatchesLibtorchWithAccumulation) { expect_matches_libtorch(3, 0.0); }
TEST(Stage0SingleRank, MatchesLibtorchWithClipping) { expect_matches_libtorch(2, 0.05); }

}  // namespace stage0_single_rank_test
}  // namespace deepshard::zero
