// Recompute on one rank: a GPT trained through checkpointed blocks gets the same gradients as
// without checkpointing (bit for bit, dropout 0 and dropout 0.1: the restored generator state
// draws the same masks), with every storage option; the generator continues as if nothing had
// been recomputed; misuse is an error.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "activation/activation_meter.h"
#include "activation/checkpoint.h"
#include "deepshard/models/gpt.h"
#include "deepshard/util/error.h"

namespace deepshard::activation {
namespace recompute_test {

models::GptConfig tiny(double dropout) {
  models::GptConfig c;
  c.n_layer = 3;
  c.n_head = 2;
  c.n_embd = 32;
  c.block_size = 16;
  c.vocab_size = 64;
  c.dropout = dropout;
  return c;
}

struct Outcome {
  double loss = 0;
  std::vector<at::Tensor> grads;
  double next_draw = 0;  // the generator's next value after backward
  int64_t regions = 0;
};

// One forward/backward of a fresh model (seed 7) on a fixed batch; `checkpointer` null: plain.
Outcome run(double dropout, Checkpointer* checkpointer) {
  models::Gpt model(tiny(dropout), /*seed=*/7);
  model->train();
  torch::manual_seed(11);
  const at::Tensor idx = torch::randint(0, 64, {2, 16}, at::kLong);
  const at::Tensor targets = torch::randint(0, 64, {2, 16}, at::kLong);
  torch::manual_seed(99);  // the dropout stream
  Outcome o;
  at::Tensor loss;
  if (checkpointer != nullptr) {
    Checkpointer::Pass pass(*checkpointer);
    loss = model->loss(idx, targets);
  } else {
    loss = model->loss(idx, targets);
  }
  if (checkpointer != nullptr) o.regions = checkpointer->last_pass_regions();
  loss.backward();
  o.loss = loss.item<double>();
  for (const auto& p : model->parameters()) o.grads.push_back(p.grad().clone());
  o.next_draw = torch::rand({1}).item<double>();
  return o;
}

void expect_identical(const Outcome& a, const Outcome& b) {
  EXPECT_EQ(a.loss, b.loss);
  ASSERT_EQ(a.grads.size(), b.grads.size());
  for (size_t i = 0; i < a.grads.size(); ++i) {
    ASSERT_TRUE(a.grads[i].defined() && b.grads[i].defined()) << "parameter " << i;
    EXPECT_TRUE(torch::equal(a.grads[i], b.grads[i]))
        << "parameter " << i << ": max difference "
        << (a.grads[i] - b.grads[i]).abs().max().item<double>();
  }
  EXPECT_EQ(a.next_draw, b.next_draw) << "the recompute disturbed the generator";
}

config::ActivationCheckpointingConfig options() { return {}; }

TEST(Recompute, GradientsBitForBitWithoutDropout) {
  Checkpointer ckpt(options());
  const Outcome plain = run(0.0, nullptr), recomputed = run(0.0, &ckpt);
  EXPECT_EQ(recomputed.regions, 3);
  expect_identical(plain, recomputed);
}

TEST(Recompute, GradientsEqualWithDropout) {
  Checkpointer ckpt(options());
  const Outcome plain = run(0.1, nullptr), recomputed = run(0.1, &ckpt);
  EXPECT_EQ(recomputed.regions, 3);
  expect_identical(plain, recomputed);
  // And the dropout does something (else the test would prove nothing about the masks).
  const Outcome no_dropout = run(0.0, nullptr);
  EXPECT_NE(plain.loss, no_dropout.loss);
}

TEST(Recompute, NumberCheckpointsLimitsTheRegions) {
  auto o = options();
  o.number_checkpoints = 1;
  Checkpointer ckpt(o);
  const Outcome plain = run(0.1, nullptr), recomputed = run(0.1, &ckpt);
  EXPECT_EQ(recomputed.regions, 1);
  expect_identical(plain, recomputed);
}

TEST(Recompute, StorageOptionsKeepTheGradients) {
  auto o = options();
  o.partition_activations = true;  // one model-parallel rank: nothing to split
  o.contiguous_memory_optimization = true;
  o.number_checkpoints = 3;
  o.cpu_checkpointing = true;
  o.synchronize_checkpoint_boundary = true;
  o.profile = true;
  Checkpointer ckpt(o);
  const Outcome plain = run(0.1, nullptr), recomputed = run(0.1, &ckpt);
  EXPECT_EQ(recomputed.regions, 3);
  expect_identical(plain, recomputed);
  const auto times = ckpt.take_times();
  ASSERT_EQ(times.size(), 3u);
  for (const auto& t : times) {
    EXPECT_GT(t.forward_s, 0);
    EXPECT_GT(t.recompute_s, 0);
    EXPECT_GT(t.backward_s, 0);
  }
  EXPECT_TRUE(ckpt.take_times().empty());
}

TEST(Recompute, ContiguousBufferHoldsEveryRegion) {
  auto o = options();
  o.partition_activations = true;
  o.contiguous_memory_optimization = true;
  o.number_checkpoints = 2;  // fewer than the blocks: the third runs normally
  Checkpointer ckpt(o);
  const Outcome plain = run(0.0, nullptr), recomputed = run(0.0, &ckpt);
  EXPECT_EQ(recomputed.regions, 2);
  expect_identical(plain, recomputed);
  // 2 slots of [2, 16, 32] fp32.
  EXPECT_EQ(ckpt.last_pass_kept_bytes(), 2 * 2 * 16 * 32 * 4);
}

TEST(Recompute, ContiguousNeedsPartitionAndCount) {
  auto o = options();
  o.contiguous_memory_optimization = true;
  o.number_checkpoints = 2;
  EXPECT_THROW(Checkpointer{o}, ConfigError);
  o.partition_activations = true;
  o.number_checkpoints.reset();
  EXPECT_THROW(Checkpointer{o}, ConfigError);
}

TEST(Recompute, PlainCallWithoutActiveCheckpointerOrUnderNoGrad) {
  int calls = 0;
  const Region region = [&calls](const std::vector<at::Tensor>& in) {
    ++calls;
    return in[0] * 2;
  };
  const at::Tensor x = torch::ones({3}, torch::requires_grad());
  at::Tensor y = checkpoint(region, {x});
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(y.requires_grad());
  Checkpointer ckpt(options());
  {
    Checkpointer::Pass pass(ckpt);
    torch::NoGradGuard no_grad;
    y = checkpoint(region, {x});
  }
  EXPECT_EQ(ckpt.last_pass_regions(), 0);
  EXPECT_FALSE(y.requires_grad());
}

TEST(Recompute, ParametersGetGradientsWhenInputsNeedNone) {
  // A region on an input without gradient (torch.utils.checkpoint's reentrant pitfall: the
  // parameters inside would get none) runs plainly.
  const at::Tensor w = torch::full({3}, 2.0, torch::requires_grad());
  const Region region = [&w](const std::vector<at::Tensor>& in) { return (in[0] * w).sum(); };
  Checkpointer ckpt(options());
  at::Tensor y;
  {
    Checkpointer::Pass pass(ckpt);
    y = checkpoint(region, {torch::ones({3})});
  }
  EXPECT_EQ(ckpt.last_pass_regions(), 0);
  y.backward();
  ASSERT_TRUE(w.grad().defined());
  EXPECT_TRUE(torch::equal(w.grad(), torch::ones({3})));
}

TEST(Recompute, InPlaceChangeOfAKeptInputIsAnError) {
  const at::Tensor w = torch::full({3}, 2.0, torch::requires_grad());
  const at::Tensor x = torch::ones({3}, torch::requires_grad()) * 1.0;  // not a leaf
  const Region region = [&w](const std::vector<at::Tensor>& in) { return (in[0] * w).sum(); };
  Checkpointer ckpt(options());
  at::Tensor y;
  {
    Checkpointer::Pass pass(ckpt);
    y = checkpoint(region, {x});
  }
  {
    torch::NoGradGuard no_grad;
    x.add_(1.0);
  }
  try {
    y.backward();
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("modified in place"), std::string::npos) << e.what();
  }
}

TEST(ActivationMeter, CountsAllocationsInsideWindowsUntilFreed) {
  ActivationMeter meter;
  ActivationMeter::Scope scope(meter);
  EXPECT_EQ(ActivationMeter::on_this_thread(), &meter);
  at::Tensor outside = torch::empty({100}, at::kFloat);
  at::Tensor kept, temp;
  {
    ActivationMeter::Window window(&meter);
    kept = torch::empty({1000}, at::kFloat);
    temp = torch::empty({500}, at::kFloat);
    temp = at::Tensor();
  }
  EXPECT_EQ(meter.live_bytes(), 4000);
  EXPECT_EQ(meter.kept_peak_bytes(), 4000);
  EXPECT_EQ(meter.transient_peak_bytes(), 6000);
  kept = at::Tensor();
  EXPECT_EQ(meter.live_bytes(), 0);
  meter.reset_peaks();
  EXPECT_EQ(meter.kept_peak_bytes(), 0);
}

TEST(ActivationMeter, AStepsPeaksLeaveOutWhatOutlivesIt) {
  ActivationMeter meter;
  ActivationMeter::Scope scope(meter);
  at::Tensor survivor, late_survivor, activation;
  {
    ActivationMeter::Window window(&meter);
    survivor = torch::empty({100}, at::kFloat);  // a buffer some layer keeps
    activation = torch::empty({1000}, at::kFloat);
  }
  activation = at::Tensor();
  {
    ActivationMeter::Window window(&meter);  // a later window (a recompute)
    activation = torch::empty({200}, at::kFloat);
    late_survivor = torch::empty({50}, at::kFloat);
  }
  activation = at::Tensor();
  const auto peaks = meter.finish_step();
  EXPECT_EQ(peaks.kept, 4000);  // the first sample (4400) without the survivor allocated before it
  EXPECT_EQ(peaks.transient, 4000);
  EXPECT_EQ(meter.live_bytes(), 0);
  EXPECT_EQ(meter.finish_step().kept, 0);
}

TEST(ActivationMeter, CheckpointingKeepsLessThanPlainTraining) {
  auto kept = [](Checkpointer* ckpt) {
    models::Gpt model(tiny(0.0), 7);
    const at::Tensor idx = torch::randint(0, 64, {2, 16}, at::kLong);
    ActivationMeter meter;
    ActivationMeter::Scope scope(meter);
    at::Tensor loss;
    {
      ActivationMeter::Window window(&meter);
      if (ckpt != nullptr) {
        Checkpointer::Pass pass(*ckpt);
        loss = model->loss(idx, idx);
      } else {
        loss = model->loss(idx, idx);
      }
    }
    loss.backward();
    return meter.kept_peak_bytes();
  };
  Checkpointer ckpt(options());
  const int64_t plain = kept(nullptr), recomputed = kept(&ckpt);
  EXPECT_GT(recomputed, 0);
  EXPECT_LT(recomputed, plain);
}

}  // namespace recompute_test
}  // namespace deepshard::activation
