// DeepSpeed's gradient-reduction knobs end to end (`deepshard launch`, 2 real ranks, the tiny GPT
// of run_helpers): communication_data_type fp16/bf16 trains 300 steps to within 3 % of the fp32
// wire's final loss while moving half the bytes per step (comm log); gradient_predivide_factor and
// prescale_gradients change only rounding (fp32: losses within 1e-4 of the plain run).
// The 300-step runs use lr 1e-3 (the helpers' tiny run has 3e-3): at 3e-3 this 118k-parameter model
// on batches of 8 x 32 tokens trains chaotically, so any rounding change (a 16-bit wire, or only
// another OpenBLAS core) sends it down another trajectory whose last losses differ by a few per
// cent either way (fp32 2.8549, bf16 2.7318: 4.3 %, on an AMD EPYC with OpenBLAS's Cooperlake
// core, 2026-11-25). At 1e-3 the trajectories stay together (fp32 2.74441, bf16 2.74443, fp16
// 2.74441), so the 3 % bound tests the wire, not the chaos.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "support/test_support.h"
#include "train/run_helpers.h"

namespace deepshard::testing {
namespace wire_format_test {

// Stage 0: every byte is the gradient all-reduce, so a 16-bit wire halves the total. Stage 2 also
// all-gathers fp32 parameters: there the saving must equal half of the gradient bytes (stage 0's).
TEST(WireFormat, SixteenBitWiresTrackFp32AndHalveTheBytes) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  const int64_t steps = 300;
  double gradient_bytes = 0;  // per step, fp32 wire, from stage 0
  for (int stage : {0, 2}) {
    const std::string zero = R"({"optimizer": {"params": {"lr": 1e-3}}, )"
                             R"("scheduler": {"params": {"warmup_max_lr": 1e-3}}, )"
                             R"("zero_optimization": {"stage": )" +
                             std::to_string(stage) + "}, ";
    auto fp32 = train_long(dir, data, "fp32_z" + std::to_string(stage),
                           zero + R"("communication_data_type": "fp32"})", steps);
    if (stage == 0) gradient_bytes = fp32.bytes_per_step;
    for (const char* wire : {"bf16", "fp16"}) {
      if (stage == 2 && std::string(wire) == "fp16") continue;  // one 16-bit wire suffices there
      const std::string name = std::string(wire) + "_z" + std::to_string(stage);
      auto run = train_long(dir, data, name,
                            zero + R"("communication_data_type": ")" + wire + R"("})", steps);
      EXPECT_LT(std::abs(run.final_loss - fp32.final_loss) / fp32.final_loss, 0.03) << name;
      const double saved = (fp32.bytes_per_step - run.bytes_per_step) / (gradient_bytes / 2);
      EXPECT_GT(saved, 0.95) << name;
      EXPECT_LT(saved, 1.05) << name;
    }
  }
}

// The gradient norm (metrics.jsonl) catches a missing or doubled scaling, which Adam's update would
// mostly hide in the loss.
TEST(WireFormat, PredivideAndPrescaleOnlyChangeRounding) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  auto run = [&](const std::string& name, const std::string& extra) {
    const std::string run_dir = dir.file("run_" + name);
    const std::string config = dir.file(name + ".json");
    write_file(config, tiny_run_config(data, run_dir, 4, 1, 20, extra));
    auto r = run_ranks(2, deepshard_exe(), {"train", "--config", config}, 300);
    EXPECT_EQ(r.exit_status, 0) << r.output;
    return read_metrics(run_dir);
  };
  const auto plain = run("plain", "{}");
  for (const auto& [name, extra] :
       {std::pair<std::string, std::string>{"predivide", R"({"gradient_predivide_factor": 3.0})"},
        {"prescale", R"({"prescale_gradients": true})"}}) {
    const auto scaled = run(name, extra);
    ASSERT_EQ(scaled.size(), plain.size()) << name;
    for (size_t i = 0; i < plain.size(); ++i) {
      // The loss within 1e-4; the gradient norm within 1e-3: it amplifies the rounding of 20 steps
      // (6.8e-4 measured at step 20 with predivide 3 after the fused kernels landed), while a
      // missing or doubled scaling would be off by 2x or 3x.
      for (const auto& [key, tolerance] :
           {std::pair<const char*, double>{"loss", 1e-4}, {"grad_norm", 1e-3}}) {
        const double want = plain[i].at(key).get<double>();
        const double got = scaled[i].at(key).get<double>();
        EXPECT_LT(std::abs(got - want), tolerance * std::abs(want))
            << name << " step " << i + 1 << " " << key;
      }
    }
  }
}

}  // namespace wire_format_test
}  // namespace deepshard::testing
