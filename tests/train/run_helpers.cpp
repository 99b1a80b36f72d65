// Implementation of the end-to-end training test helpers (run_helpers.h).
#include "train/run_helpers.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

namespace deepshard::testing {

std::string make_token_file(const TempDir& dir) {
  // A fixed ASCII text (a snapshot of this project's early public headers): the tests' trajectories
  // must not change when the sources change. ASCII only: a byte that never occurs as a target until
  // late in training gives single steps with huge, chaotic losses, which is not what the
  // equivalence tests are about.
  const std::string text = read_file(source_dir() + "/tests/train/data/corpus.txt");
  const std::string text_path = dir.file("text.txt");
  write_file(text_path, text);
  const std::string out = dir.file("text.bin");
  auto r = run_deepshard({"prepare-data", text_path, "-o", out}, 60);
  EXPECT_EQ(r.exit_status, 0) << r.output;
  return out;
}

std::string tiny_run_config(const std::string& data, const std::string& run_dir, int64_t micro,
                            int64_t gas, int64_t steps, const std::string& extra) {
  nlohmann::json j = {
      {"train_micro_batch_size_per_gpu", micro},
      {"gradient_accumulation_steps", gas},
      {"gradient_clipping", 0.5},
      {"optimizer",
       {{"type", "AdamW"},
        {"params", {{"lr", 3e-3}, {"betas", {0.9, 0.95}}, {"weight_decay", 0.1}}}}},
      {"scheduler",
       {{"type", "WarmupLR"},
        {"params", {{"warmup_max_lr", 3e-3}, {"warmup_num_steps", 5}, {"warmup_type", "linear"}}}}},
      {"zero_optimization", {{"stage", 0}, {"reduce_bucket_size", 20000}}},
      {"model",
       {{"preset", "tiny"}, {"n_layer", 2}, {"n_embd", 64}, {"n_head", 4}, {"block_size", 32}}},
      {"data", {{"train", data}}},
      {"train", {{"steps", steps}, {"seed", 42}, {"run_dir", run_dir}, {"log_interval", 5}}},
      {"comm", {{"timeout_s", 60}}}};
  j.merge_patch(nlohmann::json::parse(extra));
  return j.dump(2);
}

nlohmann::json read_summary(const TempDir& dir, const std::string& name) {
  return nlohmann::json::parse(read_file(dir.file("run_" + name) + "/summary.json"));
}

std::vector<nlohmann::json> read_metrics(const std::string& run_dir) {
  std::vector<nlohmann::json> out;
  std::istringstream lines(read_file(run_dir + "/metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

RunLosses losses_of(const std::string& run_dir, const std::string& output) {
  RunLosses out;
  out.output = output;
  for (const auto& record : read_metrics(run_dir)) {
    out.losses.push_back(record.at("loss").get<double>());
  }
  return out;
}

RunLosses train_and_read_losses(const TempDir& dir, const std::string& data, int ranks,
                                int64_t micro, int64_t gas, const std::string& name,
                                const std::string& extra, int64_t steps) {
  const std::string run_dir = dir.file("run_" + name);
  const std::string config = dir.file(name + ".json");
  write_file(config, tiny_run_config(data, run_dir, micro, gas, steps, extra));
  auto r = run_ranks(ranks, deepshard_exe(), {"train", "--config", config}, 300);
  RunLosses out;
  out.output = r.output;
  EXPECT_EQ(r.exit_status, 0) << r.output;
  for (const auto& record : read_metrics(run_dir)) {
    out.losses.push_back(record.at("loss").get<double>());
    // fp16 steps skipped on overflow have no finite norm (null in metrics.jsonl).
    const auto& norm = record.at("grad_norm");
    if (norm.is_number() && norm.get<double>() > 0.5) out.clipped = true;
  }
  return out;
}

LongRun train_long(const TempDir& dir, const std::string& data, const std::string& name,
                   const std::string& extra, int64_t steps) {
  const std::string run_dir = dir.file("run_" + name);
  const std::string config = dir.file(name + ".json");
  write_file(config, tiny_run_config(data, run_dir, 4, 1, steps, extra));
  auto r = run_ranks(2, deepshard_exe(), {"train", "--config", config}, 600);
  EXPECT_EQ(r.exit_status, 0) << r.output;
  auto records = read_metrics(run_dir);
  LongRun out;
  if (records.size() < 10) {
    ADD_FAILURE() << name << ": " << records.size() << " metric records";
    return out;
  }
  for (size_t i = records.size() - 10; i < records.size(); ++i) {
    out.final_loss += records[i].at("loss").get<double>() / 10;
  }
  for (const auto& record : records) {
    out.bytes_per_step += record.at("comm_bytes").get<double>() / records.size();
  }
  out.last_step_bytes = records.back().at("comm_bytes").get<double>();
  std::printf("%s: final loss %.4f, %.0f comm bytes per step (last step %.0f)\n", name.c_str(),
              out.final_loss, out.bytes_per_step, out.last_step_bytes);
  return out;
}

double expect_same_losses(const RunLosses& run, const RunLosses& reference,
                          const std::string& what) {
  EXPECT_EQ(run.losses.size(), reference.losses.size()) << what;
  double max_rel = 0;
  for (size_t i = 0; i < std::min(run.losses.size(), reference.losses.size()); ++i) {
    const double rel =
        std::abs(run.losses[i] - reference.losses[i]) / std::abs(reference.losses[i]);
    max_rel = std::max(max_rel, rel);
    EXPECT_LT(rel, 1e-4) << what << ", step " << i + 1 << ": " << run.losses[i] << " vs "
                         << reference.losses[i];
  }
  std::printf("%s: max relative loss difference %.2e over %zu steps\n", what.c_str(), max_rel,
              run.losses.size());
  return max_rel;
}

std::vector<double> grad_norms(const TempDir& dir, const std::string& name) {
  std::vector<double> out;
  for (const auto& record : read_metrics(dir.file("run_" + name)))
    out.push_back(record.at("grad_norm").get<double>());
  return out;
}

std::vector<double> norm_differences(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> out;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i)
    out.push_back(std::abs(a[i] - b[i]) / std::abs(b[i]));
  return out;
}

void expect_same_norms(const std::vector<double>& run, const std::vector<double>& reference,
                       const std::string& what, const std::vector<double>& order_noise) {
  ASSERT_EQ(run.size(), reference.size()) << what;
  if (!order_noise.empty()) {
    ASSERT_EQ(order_noise.size(), reference.size()) << what;
  }
  double worst = 0.0;
  const auto rel = norm_differences(run, reference);
  for (size_t i = 0; i < run.size(); ++i) {
    worst = std::max(worst, rel[i]);
    const double bound = 1e-3 + (order_noise.empty() ? 0.0 : 4 * order_noise[i]);
    EXPECT_LT(rel[i], bound) << what << ": step " << i + 1 << " grad norm " << run[i] << " vs "
                             << reference[i];
  }
  std::printf("%s: worst grad-norm relative difference %.3g\n", what.c_str(), worst);
}

}  // namespace deepshard::testing
