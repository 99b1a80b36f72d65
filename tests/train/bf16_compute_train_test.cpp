// bf16 computed in fp32 (`deepshard train --bf16-compute fp32`, kernels/bf16_compute.h) through
// `deepshard train` with 2 real ranks at ZeRO stages 0 and 3, 20 steps: the losses stay within
// bf16's distance of the fp32 single-rank losses (as mixed_precision_test.cpp bounds native bf16)
// and of the native bf16 run at the same stage where native bf16 accumulates in fp32 (elsewhere:
// at least as close to fp32 as native bf16 is), while everything stored and sent is what native
// bf16 stores and sends: the memory ledger's bytes (bf16 parameters and gradients, fp32 master
// weights and Adam states) and the communication bytes of every step are equal to the native
// run's, and half of an fp32 run's. The start-up line and summary.json name the choice.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "kernels/bf16_compute.h"
#include "support/test_support.h"
#include "train/run_helpers.h"

namespace deepshard::testing {
namespace bf16_compute_train_test {

constexpr int kRanks = 2;
constexpr int64_t kGlobalBatch = 72;
constexpr int64_t kSteps = 20;

struct Bf16Run {
  std::vector<nlohmann::json> metrics;
  nlohmann::json summary;
  std::string output;
};

Bf16Run train_bf16(const TempDir& dir, const std::string& data, int stage,
                   const std::string& compute) {
  const std::string name = "bf16_" + compute + "_s" + std::to_string(stage);
  // Both report their MFU: against the peak of the arithmetic their matmuls run (the same extra
  // timing collectives on both sides, so their comm bytes stay comparable).
  const nlohmann::json extra = {{"bf16", {{"enabled", true}}},
                                {"zero_optimization", {{"stage", stage}}},
                                {"wall_clock_breakdown", true}};
  const std::string config = dir.file(name + ".json");
  write_file(config, tiny_run_config(data, dir.file("run_" + name), kGlobalBatch / kRanks, 1,
                                     kSteps, extra.dump()));
  const auto r = run_ranks(kRanks, deepshard_exe(),
                           {"train", "--config", config, "--bf16-compute", compute}, 300);
  EXPECT_EQ(r.exit_status, 0) << r.output;
  Bf16Run out;
  out.output = r.output;
  out.metrics = read_metrics(dir.file("run_" + name));
  out.summary = nlohmann::json::parse(read_file(dir.file("run_" + name) + "/summary.json"));
  return out;
}

std::vector<double> losses(const std::vector<nlohmann::json>& metrics) {
  std::vector<double> out;
  for (const auto& m : metrics) out.push_back(m.at("loss").get<double>());
  return out;
}

// bf16's distance to another run (mixed_precision_test.cpp's bound for native bf16 against fp32):
// within 2e-2 relative on the first 15 steps and on all but at most 2 of the 20 (late single-step
// loss spikes on this data are chaotic in the rounding). Returns the largest difference.
double expect_within_bf16(const std::vector<double>& run, const std::vector<double>& reference,
                          const std::string& what) {
  EXPECT_EQ(run.size(), reference.size()) << what;
  double worst = 0;
  int outside = 0;
  for (size_t i = 0; i < std::min(run.size(), reference.size()); ++i) {
    const double rel = std::abs(run[i] - reference[i]) / reference[i];
    worst = std::max(worst, rel);
    if (i < 15) {
      EXPECT_LT(rel, 2e-2) << what << ", step " << i + 1;
    }
    if (rel >= 2e-2) ++outside;
  }
  EXPECT_LE(outside, 2) << what << ": steps beyond 2e-2";
  std::printf("%s: max relative loss difference %.2e\n", what.c_str(), worst);
  return worst;
}

// The largest relative difference between two runs' losses.
double max_difference(const std::vector<double>& run, const std::vector<double>& reference) {
  double worst = 0;
  for (size_t i = 0; i < std::min(run.size(), reference.size()); ++i)
    worst = std::max(worst, std::abs(run[i] - reference[i]) / reference[i]);
  return worst;
}

TEST(Bf16ComputeTrain, Fp32ComputeTrainsLikeBf16WithBf16Bytes) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  const auto fp32 = train_and_read_losses(dir, data, 1, kGlobalBatch, 1, "fp32");
  ASSERT_EQ(fp32.losses.size(), static_cast<size_t>(kSteps));
  // Native bf16 is a reference where libtorch's bf16 products accumulate in fp32 (oneDNN, on a CPU
  // with AVX-512 BW/VL/DQ). Where they do not (its generic bf16 GEMM: a CPU without AVX-512, or
  // this test under `scripts/test.sh --isa avx2`, whose ranks inherit the forced level) native
  // bf16 itself drifts from fp32 (measured 7.8e-2 on an AVX2-only CPU), and the fp32-computed run
  // must be at least as close to fp32 as it is instead.
  std::string native_check;
  const bool native_accurate = kernels::libtorch_bf16_matmul_accurate(&native_check);
  if (!native_accurate)
    std::printf("native bf16 is not a reference here: %s\n", native_check.c_str());
  for (int stage : {0, 3}) {
    const std::string at_stage = " (ZeRO stage " + std::to_string(stage) + ", N = 2)";
    const Bf16Run native = train_bf16(dir, data, stage, "native");
    const Bf16Run computed = train_bf16(dir, data, stage, "fp32");
    ASSERT_EQ(native.metrics.size(), static_cast<size_t>(kSteps));
    ASSERT_EQ(computed.metrics.size(), static_cast<size_t>(kSteps));
    EXPECT_NE(computed.output.find("bf16 compute: fp32"), std::string::npos) << computed.output;
    EXPECT_EQ(computed.summary.at("platform").at("bf16_compute"), "fp32");
    EXPECT_EQ(native.summary.at("platform").at("bf16_compute"), "native");
    EXPECT_EQ(computed.summary.at("matmul_peak_dtype"), "fp32") << at_stage;
    EXPECT_EQ(native.summary.at("matmul_peak_dtype"), "bf16") << at_stage;

    const auto computed_losses = losses(computed.metrics), native_losses = losses(native.metrics);
    const double to_fp32 = expect_within_bf16(computed_losses, fp32.losses,
                                              "bf16 computed in fp32 vs fp32" + at_stage);
    if (native_accurate) {
      expect_within_bf16(computed_losses, native_losses,
                         "bf16 computed in fp32 vs native bf16" + at_stage);
    } else {
      const double native_to_fp32 = max_difference(native_losses, fp32.losses);
      EXPECT_LE(to_fp32, native_to_fp32) << at_stage;
      std::printf("native bf16 vs fp32%s: max relative loss difference %.2e\n", at_stage.c_str(),
                  native_to_fp32);
    }
    EXPECT_LT(computed_losses.back(), computed_losses.front()) << at_stage;

    // Stored and sent as native bf16: the ledger's every category, and every step's bytes.
    const auto& ledger = computed.summary.at("ledger_bytes_rank0");
    EXPECT_EQ(ledger, native.summary.at("ledger_bytes_rank0")) << at_stage;
    for (int64_t i = 0; i < kSteps; ++i) {
      EXPECT_EQ(computed.metrics[i].at("comm_bytes"), native.metrics[i].at("comm_bytes"))
          << at_stage << ", step " << i + 1;
    }
    // And those are bf16's bytes: half of an fp32 run's at the same stage for the parameters and
    // for what is communicated (gradients reduced in bf16, stage 3's gathers of bf16 shards), up
    // to the fp32 scalars every step also sends (the loss, the norm, the overflow flag).
    const auto fp32_run = train_and_read_losses(
        dir, data, kRanks, kGlobalBatch / kRanks, 1, "fp32_s" + std::to_string(stage),
        nlohmann::json{{"zero_optimization", {{"stage", stage}}}, {"wall_clock_breakdown", true}}
            .dump(),
        kSteps);
    ASSERT_EQ(fp32_run.losses.size(), static_cast<size_t>(kSteps));
    const auto fp32_summary = nlohmann::json::parse(
        read_file(dir.file("run_fp32_s" + std::to_string(stage)) + "/summary.json"));
    const int64_t parameter_bytes = ledger.at("parameters");
    const int64_t fp32_parameter_bytes = fp32_summary.at("ledger_bytes_rank0").at("parameters");
    // (up to the alignment padding of the partitions, a few elements)
    EXPECT_NEAR(double(parameter_bytes) / double(fp32_parameter_bytes), 0.5, 0.01) << at_stage;
    const auto fp32_metrics = read_metrics(dir.file("run_fp32_s" + std::to_string(stage)));
    const double bf16_bytes = computed.metrics.back().at("comm_bytes").get<double>();
    const double fp32_bytes = fp32_metrics.back().at("comm_bytes").get<double>();
    EXPECT_NEAR(bf16_bytes / fp32_bytes, 0.5, 0.01) << at_stage;
    std::printf(
        "stage %d: ledger parameters %lld bytes (fp32: %lld); comm bytes/step %.0f (fp32: %.0f)\n",
        stage, static_cast<long long>(parameter_bytes),
        static_cast<long long>(fp32_parameter_bytes), bf16_bytes, fp32_bytes);
  }
}

TEST(Bf16ComputeTrain, RejectsAnUnknownChoice) {
  TempDir dir;
  const std::string config = dir.file("run.json");
  write_file(config, tiny_run_config(dir.file("missing.bin"), dir.file("run"), 2, 1, 1));
  const auto r = run_deepshard({"train", "--config", config, "--bf16-compute", "fast"}, 60);
  EXPECT_NE(r.exit_status, 0);
  EXPECT_NE(r.output.find("--bf16-compute fast: expected auto (the default), native or fp32"),
            std::string::npos)
      << r.output;
}

}  // namespace bf16_compute_train_test
}  // namespace deepshard::testing
