// `deepshard launch --autotuning` end to end with real ranks: the tiny GPT at N = 2 tuned over
// ZeRO stages 0, 1 and 3 and three micro-batch sizes each (every experiment a real 2-rank job), one
// experiment forced out of memory by a tiny limit, the winner trained by `run`, and a second
// tuning with overwrite: false and a smaller budget that reuses every finished experiment and
// prunes by the estimate what no longer fits.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/test_support.h"
#include "train/run_helpers.h"

namespace deepshard::testing {
namespace autotuner_test {

using nlohmann::json;

std::vector<json> read_rows(const std::string& results) {
  std::vector<json> rows;
  std::istringstream lines(read_file(results + "/results.jsonl"));
  for (std::string line; std::getline(lines, line);) rows.push_back(json::parse(line));
  return rows;
}

const json* find_row(const std::vector<json>& rows, const std::string& name) {
  for (const auto& r : rows)
    if (r.at("name") == name) return &r;
  return nullptr;
}

TEST(Autotuner, TunesTheTinyGptWithRealRanks) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  const std::string results = dir.file("results");
  const json extra = {{"zero_optimization", {{"stage", json::array({0, 1, 3})}}},
                      {"autotuning",
                       {{"enabled", true},
                        {"results_dir", results},
                        {"exps_dir", dir.file("exps")},
                        {"start_profile_step", 2},
                        {"end_profile_step", 4},
                        {"max_train_batch_size", 16}}}};
  const std::string config = dir.file("run.json");
  write_file(config, tiny_run_config(data, dir.file("run"), 2, 1, 6, extra.dump()));
  const std::string oom = "z1_gas2_tmbspg4";
  // deepshard_faults (tests/workers/fault_main.cpp) reads the trial memory limit of `oom`.
  auto r = run_exe(faults_exe(),
                   {"launch", "-n", "2", "--autotuning", "run", "--memory-budget", "4e9", "--",
                    deepshard_exe(), "train", "--config", config},
                   600, {{"DEEPSHARD_TEST_TRIAL_MEMORY_LIMIT", oom + "=50000000"}});
  ASSERT_EQ(r.exit_status, 0) << r.output;
  std::printf("%s\n", r.output.c_str());

  const auto rows = read_rows(results);
  int ran = 0;
  for (const auto& row : rows) {
    if (row.at("status") != "ran" || row.at("space") == "profile") continue;
    ++ran;
    EXPECT_GT(row.at("throughput").get<double>(), 0) << row.dump();
    EXPECT_GT(row.at("peak_rss_bytes").get<int64_t>(), 0) << row.dump();
    EXPECT_GT(row.at("memory_estimate_bytes").get<int64_t>(), 0) << row.dump();
    EXPECT_TRUE(std::filesystem::exists(results + "/" + row.at("name").get<std::string>() +
                                        "/metrics.json"));
  }
  EXPECT_GE(ran, 6);
  // The experiment with the tiny limit was stopped and recorded; the stage-3 ones after it ran.
  const json* stopped = find_row(rows, oom);
  ASSERT_NE(stopped, nullptr);
  EXPECT_EQ(stopped->at("status"), "out of memory") << stopped->dump();
  EXPECT_NE(stopped->at("reason").get<std::string>().find("> the limit 48 MiB"), std::string::npos)
      << stopped->dump();
  for (const char* later : {"z3_gas4_tmbspg2", "z3_gas2_tmbspg4", "z3_gas1_tmbspg8"}) {
    const json* row = find_row(rows, later);
    ASSERT_NE(row, nullptr) << later;
    EXPECT_EQ(row->at("status"), "ran") << row->dump();
  }

  // The best, as ds_config_optimal.json, against the baseline measured in the same tuning.
  const json* baseline = find_row(rows, "baseline");
  ASSERT_NE(baseline, nullptr);
  ASSERT_EQ(baseline->at("status"), "ran");
  const json optimal = json::parse(read_file(results + "/ds_config_optimal.json"));
  EXPECT_FALSE(optimal.contains("autotuning"));
  EXPECT_FALSE(optimal.contains("model"));
  const json* best = nullptr;
  for (const auto& row : rows) {
    if (row.at("status") == "ran" && row.at("space") != "profile" &&
        (!best || row.at("throughput").get<double>() > best->at("throughput").get<double>()))
      best = &row;
  }
  ASSERT_NE(best, nullptr);
  EXPECT_GE(best->at("throughput").get<double>(), baseline->at("throughput").get<double>());
  EXPECT_EQ(optimal.at("zero_optimization").at("stage"), best->at("stage"));
  EXPECT_EQ(optimal.at("train_micro_batch_size_per_gpu"),
            best->at("train_micro_batch_size_per_gpu"));
  EXPECT_EQ(optimal.at("gradient_accumulation_steps"), best->at("gradient_accumulation_steps"));
  std::printf("best %s %.1f samples/s; baseline %.1f samples/s\n",
              best->at("name").get<std::string>().c_str(), best->at("throughput").get<double>(),
              baseline->at("throughput").get<double>());
  // `run` trained the user's 6 steps with it, in the user's run folder.
  const json summary = json::parse(read_file(dir.file("run") + "/summary.json"));
  EXPECT_EQ(summary.at("steps"), 6);
  EXPECT_EQ(summary.at("config").at("zero_optimization").at("stage"), best->at("stage"));
  EXPECT_EQ(summary.at("config").at("train_micro_batch_size_per_gpu"),
            best->at("train_micro_batch_size_per_gpu"));
  for (const char* file : {"summary.txt", "report.html", "run_optimal.json", "cmd_optimal.txt"})
    EXPECT_TRUE(std::filesystem::exists(results + "/" + file)) << file;
  EXPECT_NE(read_file(results + "/report.html").find("chart-metric"), std::string::npos);

  // overwrite: false reuses every finished experiment (the one out of memory too). With a budget
  // between the estimates of stage 0's micro-batches 4 and 8, the estimate prunes 8 before any
  // run (pruning is decided again, never reused), and the largest micro-batch it fits is tried.
  const json* z0_4 = find_row(rows, "z0_gas2_tmbspg4");
  const json* z0_8 = find_row(rows, "z0_gas1_tmbspg8");
  ASSERT_TRUE(z0_4 && z0_8);
  const int64_t e4 = z0_4->at("memory_estimate_bytes").get<int64_t>();
  const int64_t e8 = z0_8->at("memory_estimate_bytes").get<int64_t>();
  ASSERT_GT(e8, e4);
  const std::string budget = std::to_string((e4 + e8) / 2);
  auto again = run_deepshard(
      {"launch", "-n", "2", "--autotuning", "tune", "--memory-budget", budget, "--",
       deepshard_exe(), "train", "--config", config, "--set", "autotuning.overwrite=false"},
      300);
  ASSERT_EQ(again.exit_status, 0) << again.output;
  std::printf("%s\n", again.output.c_str());
  const auto second = read_rows(results);
  const json* pruned = find_row(second, "z0_gas1_tmbspg8");
  ASSERT_NE(pruned, nullptr);
  EXPECT_EQ(pruned->at("status"), "pruned") << pruned->dump();
  EXPECT_NE(pruned->at("reason").get<std::string>().find("> budget"), std::string::npos);
  EXPECT_EQ(pruned->at("peak_rss_bytes"), 0);  // never started
  int reused = 0, new_runs = 0;
  for (const auto& row : second) {
    if (row.at("status") == "pruned") continue;
    const json* before = find_row(rows, row.at("name"));
    if (before == nullptr) {  // the largest micro-batch the estimate fits
      ++new_runs;
      EXPECT_LE(row.at("memory_estimate_bytes").get<int64_t>(), (e4 + e8) / 2) << row.dump();
      continue;
    }
    EXPECT_TRUE(row.at("reused").get<bool>()) << row.dump();
    EXPECT_EQ(row.at("throughput"), before->at("throughput"));
    EXPECT_EQ(row.at("status"), before->at("status"));
    ++reused;
  }
  EXPECT_GE(reused, 6);
  EXPECT_LE(new_runs, 3);  // at most one per stage
}

}  // namespace autotuner_test
}  // namespace deepshard::testing
