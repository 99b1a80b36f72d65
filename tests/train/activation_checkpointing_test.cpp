// Activation checkpointing end to end: `deepshard train` with real ranks (N = 2 and 3) at ZeRO
// stages 0, 2 and 3 (stage 3 with prefetch and a stage3_max_live_parameters below one block), with
// dropout 0.1, gives for 20 steps exactly the losses of the same run without checkpointing, with
// every block checkpointed or number_checkpoints 1, and with contiguous_memory_optimization (also
// without number_checkpoints, which DeepSpeed requires and deepshard takes from the model),
// cpu_checkpointing, profile and synchronize_checkpoint_boundary on. metrics.jsonl carries the
// memory profile (fewer activation bytes kept with checkpointing) and the profile's times.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "support/test_support.h"
#include "train/run_helpers.h"

namespace deepshard::testing {
namespace activation_checkpointing_test {

constexpr int64_t kGlobalBatch = 12;

struct Case {
  int ranks;
  int stage;
  nlohmann::json options;  // activation_checkpointing
  std::string what;
};

nlohmann::json run_sections(int stage, bool checkpointing, const nlohmann::json& options) {
  nlohmann::json zero = {{"stage", stage}};
  if (stage == 3) {
    // Prefetch on; at most 1000 gathered elements beyond the running unit (a block has 49984):
    // nothing is gathered ahead, every fetch (the recompute's included) gathers on demand.
    zero.update({{"stage3_prefetch_bucket_size", 50'000'000},
                 {"stage3_max_live_parameters", 1000},
                 {"stage3_param_persistence_threshold", 0}});
  }
  nlohmann::json extra = {{"zero_optimization", zero},
                          {"model", {{"dropout", 0.1}}},
                          {"train", {{"activation_checkpointing", checkpointing}}}};
  if (checkpointing) {
    extra["activation_checkpointing"] = options;
    extra["memory_breakdown"] = true;
    extra["steps_per_print"] = 10;
  }
  return extra;
}

TEST(ActivationCheckpointing, SameLossesAsWithoutAtStages023) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  const nlohmann::json contiguous = {{"partition_activations", true},
                                     {"contiguous_memory_optimization", true},
                                     {"number_checkpoints", 2},
                                     {"cpu_checkpointing", true}};
  const std::vector<Case> cases = {
      {2, 0, nlohmann::json::object(), "every block"},
      {2, 2, {{"number_checkpoints", 1}}, "number_checkpoints 1"},
      {2, 3, contiguous, "contiguous + partition + cpu_checkpointing"},
      // As the system's combined example writes it: no number_checkpoints (sized from the model).
      {3,
       0,
       {{"partition_activations", true},
        {"contiguous_memory_optimization", true},
        {"cpu_checkpointing", true}},
       "contiguous without number_checkpoints + partition + cpu_checkpointing"},
      {3, 2, {{"profile", true}, {"synchronize_checkpoint_boundary", true}}, "profile, sync"},
      {3, 3, {{"number_checkpoints", 1}, {"profile", true}}, "number_checkpoints 1, profile"},
  };
  for (const Case& c : cases) {
    const std::string tag = "n" + std::to_string(c.ranks) + "_s" + std::to_string(c.stage);
    const int64_t micro = kGlobalBatch / c.ranks;
    auto plain = train_and_read_losses(dir, data, c.ranks, micro, 1, tag + "_plain",
                                       run_sections(c.stage, false, {}).dump());
    auto recomputed = train_and_read_losses(dir, data, c.ranks, micro, 1, tag + "_ckpt",
                                            run_sections(c.stage, true, c.options).dump());
    const std::string what =
        "N=" + std::to_string(c.ranks) + " stage " + std::to_string(c.stage) + ", " + c.what;
    ASSERT_EQ(recomputed.losses.size(), 20u) << what << "\n" << recomputed.output;
    ASSERT_EQ(plain.losses.size(), 20u) << what;
    for (size_t i = 0; i < 20; ++i)
      EXPECT_EQ(recomputed.losses[i], plain.losses[i]) << what << ", step " << i + 1;
    std::printf("%s: 20 losses equal to the run without checkpointing (last %.6f)\n", what.c_str(),
                recomputed.losses.back());
    EXPECT_NE(recomputed.output.find("memory step 10"), std::string::npos)
        << "memory_breakdown printed nothing\n"
        << recomputed.output;

    const auto plain_metrics = read_metrics(dir.file("run_" + tag + "_plain"));
    const auto metrics = read_metrics(dir.file("run_" + tag + "_ckpt"));
    const auto& first = metrics.at(1);
    const int64_t regions = c.options.value("number_checkpoints", 2);
    EXPECT_EQ(first.at("checkpointed_regions").get<int64_t>(), regions) << what;
    const int64_t kept = first.at("memory").at("activations_kept");
    const int64_t kept_plain = plain_metrics.at(1).at("memory").at("activations_kept");
    EXPECT_GT(kept, 0) << what;
    EXPECT_LT(kept, kept_plain) << what;
    EXPECT_GT(first.at("memory").at("rss").get<int64_t>(), 0);
    EXPECT_GT(first.at("memory").at("parameters").get<int64_t>(), 0);
    if (c.options.value("profile", false)) {
      const auto& regions_times = first.at("checkpoint_profile");
      ASSERT_EQ(int64_t(regions_times.size()), regions) << what;
      EXPECT_GT(regions_times[0].at("recompute_s").get<double>(), 0) << what;
    }
    const auto summary =
        nlohmann::json::parse(read_file(dir.file("run_" + tag + "_ckpt") + "/summary.json"));
    // The run's peak is the largest step's; every step keeps the same (buffers a layer allocates
    // lazily in a forward and keeps, such as the comm layer's scratch, are not activations).
    int64_t largest = 0;
    for (const auto& m : metrics) {
      largest = std::max(largest, m.at("memory").at("activations_kept").get<int64_t>());
      EXPECT_EQ(m.at("memory").at("activations_kept").get<int64_t>(), kept)
          << what << ", step " << m.at("step");
    }
    EXPECT_EQ(summary.at("memory_profile").at("activations_kept").get<int64_t>(), largest) << what;
    if (c.stage == 3) {
      // stage3_max_live_parameters holds through the recompute: besides the root, one block (the
      // running one) at a time.
      const int64_t root_and_block =
          summary.at("ledger_peak_bytes_rank0").at("gathered_params").get<int64_t>() -
          summary.at("ledger_bytes_rank0").at("gathered_params").get<int64_t>();
      constexpr int64_t kTinyBlock = 12 * 64 * 64 + 13 * 64;
      EXPECT_LE(root_and_block, 4 * (kTinyBlock + c.ranks)) << what;
    }
  }
}

}  // namespace activation_checkpointing_test
}  // namespace deepshard::testing

namespace deepshard::testing {
namespace activation_checkpointing_test {

// `deepshard estimate --model`: the activation table and the largest micro-batch within a budget
// (more with checkpointing); the model options need --model.
TEST(ActivationCheckpointing, EstimateCommandPrintsActivationsAndLargestMicroBatch) {
  auto r = run_deepshard({"estimate", "--model", "gpt2", "--ranks", "2", "--stage", "3", "--dtype",
                          "fp32", "--budget", "4e9"});
  ASSERT_EQ(r.exit_status, 0) << r.output;
  // gpt2 at 1024 tokens, fp32 (models/gpt/memory.h): 1.13 GiB without, 132.02 MiB with.
  EXPECT_NE(r.output.find("without checkpointing     1.13 GiB"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("with checkpointing      132.02 MiB"), std::string::npos) << r.output;
  const auto largest = [&](const std::string& label) {
    const auto at = r.output.find(label, r.output.find("largest micro-batch"));
    EXPECT_NE(at, std::string::npos) << r.output;
    return std::stoll(r.output.substr(at + label.size()));
  };
  const auto without = largest("without checkpointing"), with = largest("with checkpointing");
  EXPECT_GE(without, 1);
  EXPECT_GT(with, 5 * without);
  auto bad = run_deepshard({"estimate", "--params", "1e6", "--seq", "128"});
  EXPECT_NE(bad.exit_status, 0);
  EXPECT_NE(bad.output.find("--seq needs --model"), std::string::npos) << bad.output;
}

}  // namespace activation_checkpointing_test
}  // namespace deepshard::testing
