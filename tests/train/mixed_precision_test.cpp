// Mixed precision end to end (`deepshard launch`, 2 real ranks, ZeRO stages 0, 1 and 2; fp16
// also at stage 3): fp16's dynamic loss scaling skips an overflowing step on every rank and
// halves the scale, bf16's overflow check skips it too, and bf16 training tracks the fp32
// single-rank losses, with stages 1 and 2 equal to stage 0.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "support/test_support.h"
#include "train/run_helpers.h"

namespace deepshard::testing {
namespace mixed_precision_test {

constexpr int kRanks = 2;
constexpr int64_t kGlobalBatch = 72;

class MixedPrecision : public ::testing::TestWithParam<int> {};

// fp16 with the initial scale 2^8 and hysteresis 1: DeepSpeed's DynamicLossScaler halves the
// scale at the first overflow. Rank 1 puts +inf into its gradient at step kInf
// (DEEPSHARD_TEST_INF_AT_STEP of the test build deepshard_faults); rank 0's gradients are finite.
TEST_P(MixedPrecision, Fp16OverflowSkipsTheStepOnEveryRank) {
  const int stage = GetParam();
  constexpr int64_t kSteps = 6, kInf = 3;
  TempDir dir;
  const std::string data = make_token_file(dir);
  const nlohmann::json extra = {
      {"fp16", {{"enabled", true}, {"initial_scale_power", 8}, {"hysteresis", 1}}},
      {"zero_optimization", {{"stage", stage}}},
      {"data", {{"valid", dir.file("text.valid.bin")}}},
      {"train", {{"eval_interval", 1}, {"eval_batches", 2}}}};
  auto run = [&](const std::string& name, const std::map<std::string, std::string>& env) {
    const std::string config = dir.file(name + ".json");
    write_file(config, tiny_run_config(data, dir.file("run_" + name), kGlobalBatch / kRanks, 1,
                                       kSteps, extra.dump()));
    auto r = run_ranks(kRanks, faults_exe(), {"train", "--config", config}, 120, env);
    EXPECT_EQ(r.exit_status, 0) << r.output;
    auto metrics = read_metrics(dir.file("run_" + name));
    EXPECT_EQ(metrics.size(), static_cast<size_t>(kSteps)) << r.output;
    return metrics;
  };
  const auto clean = run("clean", {});
  const auto injected = run("inf", {{"DEEPSHARD_TEST_INF_AT_STEP", std::to_string(kInf)},
                                    {"DEEPSHARD_TEST_INF_RANK", "1"}});
  ASSERT_EQ(clean.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(injected.size(), static_cast<size_t>(kSteps));
  for (int64_t i = 0; i < kSteps; ++i) {
    const auto& c = clean[i];
    const auto& r = injected[i];
    const int64_t step = i + 1;
    EXPECT_FALSE(c.at("skipped").get<bool>()) << "step " << step;
    EXPECT_EQ(c.at("loss_scale").get<double>(), 256.0) << "step " << step;
    // metrics.jsonl is rank 0's view: rank 0 saw no inf itself, so it skipped by agreement.
    EXPECT_EQ(r.at("skipped").get<bool>(), step == kInf) << "step " << step;
    // The scale used at each step: 2^8 through the overflow, halved from the next step on.
    EXPECT_EQ(r.at("loss_scale").get<double>(), step <= kInf ? 256.0 : 128.0) << "step " << step;
    // Up to the overflow both runs are the same computation: bit-identical losses.
    if (step <= kInf) {
      EXPECT_EQ(r.at("loss").get<double>(), c.at("loss").get<double>()) << "step " << step;
    }
  }
  // The exact check that nothing changed across the skipped step: the validation loss is
  // evaluated after every step on the same fixed batches and averaged over the ranks, so the
  // parameters after step kInf (skipped) give bit-for-bit the validation loss of those after step
  // kInf - 1 on both ranks. The next step updates again, so its validation loss moves.
  const double before = injected[kInf - 2].at("val_loss").get<double>();
  EXPECT_EQ(injected[kInf - 1].at("val_loss").get<double>(), before);
  EXPECT_NE(injected[kInf].at("val_loss").get<double>(), before);
  EXPECT_NE(clean[kInf - 1].at("val_loss").get<double>(), before);
  // The schedule did not advance on the skipped step: the next step uses the skipped step's rate.
  EXPECT_EQ(injected[kInf].at("lr").get<double>(), injected[kInf - 1].at("lr").get<double>());
  std::printf(
      "stage %d: step %lld skipped on both ranks, loss scale 256 -> %g, val loss %.6f "
      "unchanged across it\n",
      stage, static_cast<long long>(kInf), injected[kInf].at("loss_scale").get<double>(), before);
}

// bf16 with bf16.check_grad_overflow (DeepSpeed's default: true): an inf in rank 1's gradient at
// step kInf skips that step on every rank (no scaling: the scale stays 1), parameters unchanged;
// with the check off the same inf reaches the parameters and the run fails on a non-finite loss.
TEST_P(MixedPrecision, Bf16OverflowCheckSkipsTheStepOnEveryRank) {
  const int stage = GetParam();
  constexpr int64_t kSteps = 5, kInf = 3;
  TempDir dir;
  const std::string data = make_token_file(dir);
  auto run = [&](const std::string& name, bool check) {
    const nlohmann::json extra = {{"bf16", {{"enabled", true}, {"check_grad_overflow", check}}},
                                  {"zero_optimization", {{"stage", stage}}},
                                  {"data", {{"valid", dir.file("text.valid.bin")}}},
                                  {"train", {{"eval_interval", 1}, {"eval_batches", 2}}}};
    const std::string config = dir.file(name + ".json");
    write_file(config, tiny_run_config(data, dir.file("run_" + name), kGlobalBatch / kRanks, 1,
                                       kSteps, extra.dump()));
    return run_ranks(
        kRanks, faults_exe(), {"train", "--config", config}, 120,
        {{"DEEPSHARD_TEST_INF_AT_STEP", std::to_string(kInf)}, {"DEEPSHARD_TEST_INF_RANK", "1"}});
  };
  const auto checked = run("checked", true);
  ASSERT_EQ(checked.exit_status, 0) << checked.output;
  const auto metrics = read_metrics(dir.file("run_checked"));
  ASSERT_EQ(metrics.size(), static_cast<size_t>(kSteps));
  for (int64_t step = 1; step <= kSteps; ++step) {
    EXPECT_EQ(metrics[step - 1].at("skipped").get<bool>(), step == kInf) << "step " << step;
    EXPECT_EQ(metrics[step - 1].at("loss_scale").get<double>(), 1.0) << "step " << step;
  }
  const double before = metrics[kInf - 2].at("val_loss").get<double>();
  EXPECT_EQ(metrics[kInf - 1].at("val_loss").get<double>(), before);
  EXPECT_NE(metrics[kInf].at("val_loss").get<double>(), before);
  if (stage == 2) {  // once is enough: without the check the inf poisons the parameters
    const auto unchecked = run("unchecked", false);
    EXPECT_NE(unchecked.exit_status, 0) << unchecked.output;
    EXPECT_NE(unchecked.output.find("the training loss is"), std::string::npos) << unchecked.output;
  }
  std::printf("bf16 stage %d: step %lld skipped on both ranks, val loss %.6f unchanged across it\n",
              stage, static_cast<long long>(kInf), before);
}

// bf16 parameters and activations, fp32 master weights and gradient accumulation: 20 steps at
// N = 2 stay within 2e-2 relative of the fp32 single-rank losses (bf16 keeps 8 significant bits
// of the forward's values) on the first 15 steps and on all but at most 2 of the 20: late in
// training this data gives single-step loss spikes (a rare byte as target) whose height is
// chaotic in the rounding (measured: fp32 6.947 vs bf16 3.639 at one step, all others within
// 1.4e-2). Stages 1 and 2 give stage 0's bf16 losses within 1e-5 (the same fp32 gradient sums
// and the same per-element Adam, only partitioned; measured: identical).
TEST(MixedPrecisionBf16, TracksFp32AndStagesAgree) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  const auto reference = train_and_read_losses(dir, data, 1, kGlobalBatch, 1, "ref");
  ASSERT_EQ(reference.losses.size(), 20u);
  std::vector<double> stage0;
  for (int stage : {0, 1, 2}) {
    const std::string name = "bf16_s" + std::to_string(stage);
    const nlohmann::json extra = {{"bf16", {{"enabled", true}}},
                                  {"zero_optimization", {{"stage", stage}}}};
    const auto run =
        train_and_read_losses(dir, data, kRanks, kGlobalBatch / kRanks, 1, name, extra.dump());
    ASSERT_EQ(run.losses.size(), 20u);
    if (stage == 0) {
      stage0 = run.losses;
      for (size_t i = 0; i < run.losses.size(); ++i)
        std::printf("step %zu: fp32 %.5f, bf16 %.5f\n", i + 1, reference.losses[i], stage0[i]);
    }
    double max_rel = 0, max_rel_stage0 = 0;
    int outside = 0;
    for (size_t i = 0; i < run.losses.size(); ++i) {
      const double rel = std::abs(run.losses[i] - reference.losses[i]) / reference.losses[i];
      const double rel0 = std::abs(run.losses[i] - stage0[i]) / stage0[i];
      max_rel = std::max(max_rel, rel);
      max_rel_stage0 = std::max(max_rel_stage0, rel0);
      if (i < 15) {
        EXPECT_LT(rel, 2e-2) << name << ", step " << i + 1;
      }
      if (rel >= 2e-2) ++outside;
      EXPECT_LT(rel0, 1e-5) << name << " vs bf16 stage 0, step " << i + 1;
    }
    EXPECT_LE(outside, 2) << name << ": steps beyond 2e-2 of fp32";
    EXPECT_LT(run.losses.back(), run.losses.front()) << name << ": the loss did not fall";
    std::printf(
        "bf16 stage %d, N = 2: max relative loss difference %.2e to fp32, %.2e to bf16 "
        "stage 0\n",
        stage, max_rel, max_rel_stage0);
    // The ledger: bf16 parameters (2 bytes each) and an fp32 master copy of what this rank updates.
    const auto ledger = read_summary(dir, name).at("ledger_bytes_rank0");
    const auto ref_ledger = read_summary(dir, "ref").at("ledger_bytes_rank0");
    const int64_t params = read_summary(dir, name).at("num_parameters");
    EXPECT_GE(ledger.at("parameters").get<int64_t>(), 2 * params);
    EXPECT_LT(ledger.at("parameters").get<int64_t>(), ref_ledger.at("parameters").get<int64_t>());
    const int64_t master = ledger.at("master_weights");
    if (stage == 0) {
      EXPECT_EQ(master, 4 * params);
    } else {
      EXPECT_GE(2 * master, 4 * params);  // the owned half, plus bucket padding
      EXPECT_LT(2 * master, 4 * params + 2 * 4 * 2 * 64);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Stages, MixedPrecision, ::testing::Values(0, 1, 2, 3),
                         [](const auto& info) { return "Stage" + std::to_string(info.param); });

}  // namespace mixed_precision_test
}  // namespace deepshard::testing
