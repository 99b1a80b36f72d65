// The activation estimate (models/gpt/memory.h) against the activation meter's count of one
// training forward/backward at micro-batch 1: within 10 % for the small and gpt2 presets (byte
// vocabulary, dropout 0) at sequence lengths 256 and 1024, with and without checkpointing every
// block; and with dropout and with number_checkpoints on a smaller model.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>

#include "activation/activation_meter.h"
#include "activation/checkpoint.h"
#include "deepshard/models/gpt.h"
#include "models/gpt/memory.h"

namespace deepshard::activation {
namespace estimate_test {

// The meter's kept peak over one pass; `ckpt` null: no checkpointing (then the forward alone:
// its end is the peak).
int64_t counted(models::GptConfig c, int64_t seq, Checkpointer* ckpt) {
  models::Gpt model(c, /*seed=*/3);
  const at::Tensor idx = torch::randint(0, c.vocab_size, {1, seq}, at::kLong);
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
  if (ckpt != nullptr) loss.backward();
  return meter.kept_peak_bytes();
}

models::GptConfig preset(const std::string& name, int64_t block) {
  models::GptConfig c;
  if (name == "small") {
    c.n_layer = 6, c.n_head = 6, c.n_embd = 384;
  } else {
    c.n_layer = 12, c.n_head = 12, c.n_embd = 768;
  }
  c.block_size = block;
  c.vocab_size = 256;
  return c;
}

void expect_within(int64_t estimate, int64_t count, double tolerance, const std::string& what) {
  const double rel = double(estimate - count) / double(count);
  std::printf("%-40s counted %12lld  estimate %12lld  (%+.2f %%)\n", what.c_str(),
              static_cast<long long>(count), static_cast<long long>(estimate), 100 * rel);
  EXPECT_LE(std::abs(rel), tolerance) << what;
}

TEST(ActivationEstimate, WithinTenPercentOfTheCountForThePresets) {
  config::ActivationCheckpointingConfig all;
  for (const std::string name : {"small", "gpt2"}) {
    for (int64_t seq : {256, 1024}) {
      const auto c = preset(name, seq);
      const auto e = models::estimate_gpt_activations(c, 1, seq, 4);
      const std::string what = name + " T=" + std::to_string(seq);
      expect_within(e.plain, counted(c, seq, nullptr), 0.10, what + " plain");
      Checkpointer ckpt(all);
      expect_within(e.checkpointed, counted(c, seq, &ckpt), 0.10, what + " checkpointed");
    }
  }
}

TEST(ActivationEstimate, DropoutAndNumberCheckpoints) {
  models::GptConfig c;
  c.n_layer = 4, c.n_head = 4, c.n_embd = 128, c.block_size = 128, c.vocab_size = 256;
  c.dropout = 0.1;
  for (int64_t n : {1, 3}) {
    config::ActivationCheckpointingConfig o;
    o.number_checkpoints = n;
    const auto e = models::estimate_gpt_activations(c, 1, 128, 4, n);
    Checkpointer ckpt(o);
    expect_within(e.checkpointed, counted(c, 128, &ckpt), 0.10,
                  "dropout 0.1, number_checkpoints " + std::to_string(n));
  }
  expect_within(models::estimate_gpt_activations(c, 1, 128, 4).plain, counted(c, 128, nullptr),
                0.10, "dropout 0.1, plain");
}

}  // namespace estimate_test
}  // namespace deepshard::activation
