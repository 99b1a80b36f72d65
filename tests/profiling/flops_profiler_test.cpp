// The flops profiler on the GPT presets: per-module FLOPs, MACs and parameters from the model's
// structure, totals against the analytic count of the matrix multiplications, DeepSpeed's layout.
#include "profiling/flops_profiler.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "deepshard/models/flops.h"
#include "deepshard/models/gpt.h"

namespace deepshard::profiling {
namespace flops_profiler_test {

struct Preset {
  const char* name;
  int64_t n_layer, n_head, n_embd, block_size, seq;
};

models::GptConfig config_of(const Preset& p) {
  models::GptConfig c;
  c.n_layer = p.n_layer;
  c.n_head = p.n_head;
  c.n_embd = p.n_embd;
  c.block_size = p.block_size;
  c.vocab_size = 256;
  return c;
}

const ModuleProfile& find(const FlopsProfiler& p, const std::string& name) {
  for (const auto& m : p.modules())
    if (m.name == name) return m;
  throw std::runtime_error("no module " + name);
}

class GptPresets : public ::testing::TestWithParam<Preset> {};

TEST_P(GptPresets, ForwardFlopsMatchTheAnalyticCount) {
  const Preset preset = GetParam();
  const auto c = config_of(preset);
  models::Gpt model(c, 1);
  const int64_t batch = 2, t = preset.seq;
  const auto idx = torch::randint(0, c.vocab_size, {batch, t}, torch::kLong);
  FlopsProfiler profiler(*model);
  profiler.start();
  auto loss = model->loss(idx, idx);
  profiler.stop();
  const double tokens = static_cast<double>(batch * t);
  const double analytic = models::gpt_flops_per_token(c, t).forward * tokens;
  // MACs are the matrix multiplications only: exactly half the analytic matmul FLOPs that MFU uses
  // (models/flops.h: the training FLOPs per token are 3x this forward).
  EXPECT_DOUBLE_EQ(models::flops_per_token(c, t), 3 * models::gpt_flops_per_token(c, t).forward);
  EXPECT_DOUBLE_EQ(2.0 * static_cast<double>(profiler.total_macs()), analytic);
  // FLOPs add DeepSpeed's elementwise counts (norms, softmax, GELU, adds): within 1 %.
  const double flops = static_cast<double>(profiler.total_flops());
  EXPECT_GT(flops, analytic);
  EXPECT_LT(flops, analytic * 1.01) << preset.name << ": " << flops / analytic;
  EXPECT_EQ(profiler.total_params(), model->num_parameters());
  EXPECT_GT(profiler.total_seconds(), 0.0);

  // Per module: a Linear is 2 * tokens * in * out; the attention holds its own matmuls (QK^T and
  // AV: 4 T C per token) besides c_attn and c_proj; a block is the sum of its parts plus adds.
  const double C = c.n_embd;
  const auto& c_attn = find(profiler, "h.0.attn.c_attn");
  EXPECT_EQ(c_attn.type, "Linear");
  EXPECT_DOUBLE_EQ(static_cast<double>(c_attn.flops), 2 * tokens * C * 3 * C);
  EXPECT_EQ(c_attn.params, static_cast<int64_t>(3 * C * C + 3 * C));
  const auto& attn = find(profiler, "h.0.attn");
  EXPECT_DOUBLE_EQ(static_cast<double>(attn.macs), tokens * (4 * C * C + 2 * t * C));
  const auto& block = find(profiler, "h.0");
  EXPECT_EQ(block.type, "Block");
  EXPECT_DOUBLE_EQ(static_cast<double>(block.macs), tokens * (12 * C * C + 2 * t * C));
  for (int64_t i = 1; i < c.n_layer; ++i)
    EXPECT_EQ(find(profiler, "h." + std::to_string(i)).flops, block.flops) << i;
  // The head tied to wte is the model's own operator, not the embedding's.
  EXPECT_EQ(find(profiler, "wte").flops, 0);
  const auto& root = profiler.modules()[0];
  EXPECT_EQ(root.type, "Gpt");
  EXPECT_GE(root.seconds, block.seconds);
}

INSTANTIATE_TEST_SUITE_P(Presets, GptPresets,
                         ::testing::Values(Preset{"tiny", 4, 4, 128, 128, 128},
                                           Preset{"small", 6, 6, 384, 256, 256},
                                           Preset{"gpt2", 12, 12, 768, 1024, 128}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(FlopsProfiler, ReportHasDeepSpeedsLayout) {
  models::GptConfig c;
  models::Gpt model(c, 1);
  FlopsProfiler profiler(*model);
  profiler.start();
  model->forward(torch::zeros({1, 16}, torch::kLong));
  profiler.stop();
  ProfileContext ctx;
  ctx.profile_step = 3;
  ctx.world_size = 2;
  ctx.micro_batch_size = 1;
  ctx.backward_seconds = 0.02;
  ctx.step_seconds = 0.01;
  const std::string text = format_profile(profiler, ctx, {});
  for (const char* expected :
       {"-------------------------- DeepSpeed Flops Profiler --------------------------",
        "Profile Summary at step 3:", "params per GPU: ", "fwd MACs per GPU: ",
        "fwd flops per GPU: ", "iter latency: ",
        "----------------------------- Aggregated Profile per GPU -----------------------------",
        "depth 0:\n    params      - {'Gpt': ", "depth 1:\n",
        "------------------------------ Detailed Profile per GPU ------------------------------",
        "Gpt(\n", "  (h): ModuleList(\n", "    (0): Block(\n", "(c_attn): Linear(",
        "in_features=64, out_features=192, bias=true)"})
    EXPECT_NE(text.find(expected), std::string::npos) << expected << "\n" << text;
  ReportOptions brief;
  brief.detailed = false;
  brief.module_depth = 1;
  const std::string short_text = format_profile(profiler, ctx, brief);
  EXPECT_EQ(short_text.find("Detailed Profile"), std::string::npos);
  EXPECT_EQ(short_text.find("depth 1:"), std::string::npos);
  EXPECT_EQ(number_to_string(10.8e6), "10.8 M");
  EXPECT_EQ(number_to_string(0), "0 ");
  EXPECT_EQ(number_to_string(0.0123), "12.3 m");
}

}  // namespace flops_profiler_test
}  // namespace deepshard::profiling
