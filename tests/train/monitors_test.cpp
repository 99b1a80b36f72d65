// The monitors of a real 2-rank run (tiny GPT, fp16 loss scaling so loss_scale is logged):
// TensorBoard events and CSV files hold exactly metrics.jsonl's values under DeepSpeed's names
// against global samples; the comms logger's bytes per collective equal the comm log's; the flops
// profiler prints DeepSpeed's layout at profile_step.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "monitor/csv_monitor.h"
#include "monitor/tensorboard.h"
#include "support/test_support.h"
#include "train/run_helpers.h"
#include "train/run_monitors.h"

namespace deepshard::testing {
namespace monitors_test {

constexpr int64_t kSteps = 4, kGlobalBatch = 4;

TEST(Monitors, TensorBoardCsvCommsLoggerAndFlopsProfilerOfARun) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  const std::string run_dir = dir.file("run");
  const nlohmann::json extra = {
      {"fp16", {{"enabled", true}, {"initial_scale_power", 8}}},
      {"steps_per_print", 2},
      {"tensorboard", {{"enabled", true}, {"output_path", dir.file("tb")}, {"job_name", "job"}}},
      {"csv_monitor", {{"enabled", true}, {"output_path", dir.file("csv")}, {"job_name", "job"}}},
      {"comms_logger", {{"enabled", true}, {"verbose", true}}},
      {"flops_profiler", {{"enabled", true}, {"profile_step", 2}, {"top_modules", 2}}}};
  const std::string config = dir.file("run.json");
  write_file(config, tiny_run_config(data, run_dir, kGlobalBatch / 2, 1, kSteps, extra.dump()));
  const auto r = run_ranks(2, deepshard_exe(), {"train", "--config", config}, 300);
  ASSERT_EQ(r.exit_status, 0) << r.output;
  const auto metrics = read_metrics(run_dir);
  ASSERT_EQ(metrics.size(), static_cast<size_t>(kSteps));

  // TensorBoard: one file; every numeric field of every record is an event at step*batch samples.
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir.file("tb/job")))
    files.push_back(e.path().string());
  ASSERT_EQ(files.size(), 1u);
  const auto events = monitor::read_event_file(files[0]);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  std::map<std::pair<std::string, int64_t>, float> logged;
  for (const auto& e : events)
    for (const auto& s : e.scalars) logged[{s.tag, e.step}] = s.value;
  size_t expected = 0;
  for (const auto& record : metrics) {
    const int64_t samples = record.at("step").get<int64_t>() * kGlobalBatch;
    for (const auto& [field, value] : train::scalar_fields(record)) {
      ++expected;
      const auto it = logged.find({train::monitor_tag(field), samples});
      ASSERT_NE(it, logged.end()) << field << " at " << samples;
      EXPECT_EQ(it->second, static_cast<float>(value)) << field;
    }
  }
  EXPECT_EQ(logged.size(), expected);
  for (const char* tag :
       {"Train/Samples/train_loss", "Train/Samples/lr", "Train/Samples/loss_scale",
        "Train/Samples/tokens_per_s", "Train/Samples/comm_wait_share",
        "Train/Samples/memory/parameters", "Train/Samples/rss_bytes"})
    EXPECT_TRUE(logged.count({tag, kGlobalBatch})) << tag;

  // CSV: DeepSpeed's files with the same values.
  const std::string loss_csv =
      read_file(dir.file("csv/job/") + monitor::CsvMonitor::file_name("Train/Samples/train_loss"));
  std::string want = "step,train_loss\r\n";
  for (const auto& record : metrics)
    want += std::to_string(record.at("step").get<int64_t>() * kGlobalBatch) + "," +
            monitor::CsvMonitor::format_value(record.at("loss").get<double>()) + "\r\n";
  EXPECT_EQ(loss_csv, want);

  // Comms logger: its bytes per collective are the comm log's; the tables are printed.
  const auto summary = nlohmann::json::parse(read_file(run_dir + "/summary.json"));
  ASSERT_TRUE(summary.contains("comms_logger")) << summary.dump(2);
  for (const auto& [op, stats] : summary.at("comm").items()) {
    int64_t bytes = 0, count = 0;
    for (const auto& [size, s] : summary.at("comms_logger").at(op).items()) {
      bytes += s.at("bytes").get<int64_t>();
      count += s.at("count").get<int64_t>();
      EXPECT_EQ(s.at("bytes").get<int64_t>(), std::stoll(size) * s.at("count").get<int64_t>());
    }
    EXPECT_EQ(bytes, stats.at("bytes").get<int64_t>()) << op;
    EXPECT_EQ(count, stats.at("calls").get<int64_t>()) << op;
  }
  EXPECT_NE(r.output.find("comms logger, step 1:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("comms logger (rank 0, whole run):"), std::string::npos);
  EXPECT_NE(r.output.find("Comm. Op            Message Size        Count"), std::string::npos);

  // Flops profiler: once, at step 2, rank 0.
  const std::string header = "-------------------------- DeepSpeed Flops Profiler";
  const auto at = r.output.find(header);
  ASSERT_NE(at, std::string::npos) << r.output;
  EXPECT_EQ(r.output.find(header, at + 1), std::string::npos);
  EXPECT_NE(r.output.find("Profile Summary at step 2:"), std::string::npos);
  EXPECT_NE(r.output.find("(c_attn): Linear("), std::string::npos);
}

}  // namespace monitors_test
}  // namespace deepshard::testing
