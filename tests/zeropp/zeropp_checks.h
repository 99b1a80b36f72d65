// Checks the ZeRO++ tests share: the loss budget of a quantized run against the exact one (the
// mean of the last 5 of 20 steps within 1 %), and that a run with a ZeRO++ key resumes from its
// step-10 checkpoint bit for bit.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/test_support.h"
#include "train/run_helpers.h"

namespace deepshard::testing {

inline double mean_of_last(const std::vector<double>& losses, size_t n) {
  double sum = 0;
  for (size_t i = losses.size() - n; i < losses.size(); ++i) sum += losses[i];
  return sum / double(n);
}

// Both runs have 20 steps and the quantized one ends (the mean of its last 5 losses) within 1 % of
// the exact one; prints both. Returns the relative difference.
inline double expect_within_loss_budget(const RunLosses& exact, const RunLosses& quantized,
                                        const std::string& what) {
  EXPECT_EQ(exact.losses.size(), 20u) << exact.output;
  EXPECT_EQ(quantized.losses.size(), 20u) << quantized.output;
  if (exact.losses.size() != 20u || quantized.losses.size() != 20u) return 1.0;
  const double exact_final = mean_of_last(exact.losses, 5);
  const double quantized_final = mean_of_last(quantized.losses, 5);
  const double rel = std::abs(quantized_final - exact_final) / exact_final;
  std::printf("mean loss of the last 5 steps: plain stage 3 %.4f, %s %.4f (%.2f %%)\n", exact_final,
              what.c_str(), quantized_final, 100 * rel);
  EXPECT_LE(rel, 0.01);
  return rel;
}

// 20 steps of `run_file(more)` (accumulation 3, micro-batch 1, `ranks` ranks) uninterrupted, then
// 10 steps saving a checkpoint at step 10 and 10 more resumed from it: the same losses bit for bit.
inline void expect_exact_resume(int ranks,
                                const std::function<std::string(const std::string&)>& run_file,
                                const std::string& what) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  const std::string ckpt = dir.file("ckpt");
  auto with_checkpoints = [&](int64_t save, const std::string& resume) {
    nlohmann::json train = {
        {"train", {{"checkpoint_dir", ckpt}, {"save_interval", save}, {"resume", resume}}}};
    return run_file(train.dump());
  };
  const auto full = train_and_read_losses(dir, data, ranks, 1, 3, "full", run_file("{}"), 20);
  const auto first =
      train_and_read_losses(dir, data, ranks, 1, 3, "first", with_checkpoints(10, ""), 10);
  const auto second =
      train_and_read_losses(dir, data, ranks, 1, 3, "second", with_checkpoints(0, "auto"), 20);
  ASSERT_EQ(full.losses.size(), 20u) << full.output;
  ASSERT_EQ(first.losses.size(), 10u) << first.output;
  ASSERT_EQ(second.losses.size(), 10u) << second.output;
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(first.losses[i], full.losses[i]) << "step " << i + 1;
    EXPECT_EQ(second.losses[i], full.losses[10 + i]) << "step " << 11 + i << " after the resume";
  }
  std::printf("N=%d, %s: steps 11-20 after the resume equal the uninterrupted run bit for bit\n",
              ranks, what.c_str());
}

}  // namespace deepshard::testing
