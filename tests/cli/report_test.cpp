// `deepshard report` in a real browser: two run folders (stage 0 fp32 and stage 3 bf16 configs)
// are rendered, the page opened in headless Chromium, which must report no JavaScript error and
// every chart drawn (a non-empty canvas); a screenshot is saved in the build folder. Skipped with a
// message when Chromium is not installed (scripts/setup.sh installs it).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "deepshard/util/error.h"
#include "monitor/html_report.h"
#include "support/test_support.h"

namespace deepshard::testing {
namespace report_test {

const char* kChromium = "/usr/bin/chromium";

void write_run(const std::string& dir, int stage, bool bf16, double speed) {
  std::filesystem::create_directories(dir);
  std::string lines;
  for (int step = 1; step <= 40; ++step) {
    nlohmann::json r = {
        {"step", step},
        {"loss", 5.5 / (1 + 0.05 * step)},
        {"lr", 1e-3 * std::min(1.0, step / 10.0)},
        {"grad_norm", 1.0},
        {"loss_scale", step < 20 ? 65536.0 : 32768.0},
        {"skipped", step == 20},
        {"tokens_per_s", speed + step},
        {"mfu", speed / 1e5},
        {"step_time_s", 0.5},
        {"comm_wait_s", 0.05 * stage + 0.01},
        {"comm_wait_share", (0.05 * stage + 0.01) / 0.5},
        {"comm_bytes", 1000000},
        {"rss_bytes", 300 << 20},
        {"memory",
         {{"parameters", (bf16 ? 20 : 40) << 20}, {"gradients", 40 << 20}, {"rss", 300 << 20}}}};
    if (step % 10 == 0) r["val_loss"] = 5.6 / (1 + 0.05 * step);
    lines += r.dump() + "\n";
  }
  write_file(dir + "/metrics.jsonl", lines);
  const nlohmann::json summary = {{"steps", 40},
                                  {"final_loss", 1.8},
                                  {"world_size", 2},
                                  {"config",
                                   {{"zero_optimization", {{"stage", stage}}},
                                    {"bf16", {{"enabled", bf16}}},
                                    {"train_batch_size", 8}}}};
  write_file(dir + "/summary.json", summary.dump(2));
}

TEST(Report, ListsConfigDifferences) {
  TempDir dir;
  write_run(dir.file("s0"), 0, false, 1000);
  write_run(dir.file("s3"), 3, true, 800);
  const auto diffs = monitor::config_differences(
      {monitor::load_report_run(dir.file("s0")), monitor::load_report_run(dir.file("s3"))});
  ASSERT_EQ(diffs.size(), 2u);
  EXPECT_EQ(diffs[0].first, "bf16.enabled");
  EXPECT_EQ(diffs[0].second, (std::vector<std::string>{"false", "true"}));
  EXPECT_EQ(diffs[1].first, "zero_optimization.stage");
  EXPECT_THROW(monitor::load_report_run(dir.file("missing")), deepshard::IoError);
  const auto r = run_deepshard({"report", dir.file("missing")});
  EXPECT_NE(r.exit_status, 0);
  EXPECT_NE(r.output.find("metrics.jsonl"), std::string::npos) << r.output;
}

// A classification run's summary: its validation accuracy, the majority-class baseline and the
// samples/s are columns of the runs' table.
TEST(Report, TableHasTheClassificationAccuracyAndBaseline) {
  TempDir dir;
  write_run(dir.file("genre"), 3, false, 1000);
  nlohmann::json summary = nlohmann::json::parse(read_file(dir.file("genre/summary.json")));
  summary["final_val_accuracy"] = 0.4125;
  summary["majority_baseline"] = 0.1653;
  summary["mean_samples_per_s"] = 12.5;
  write_file(dir.file("genre/summary.json"), summary.dump());
  const std::string html =
      monitor::render_report_html({monitor::load_report_run(dir.file("genre"))});
  EXPECT_NE(html.find("<th>val accuracy</th><th>majority-class baseline</th>"), std::string::npos);
  EXPECT_NE(html.find("<td>41.2 %</td><td>16.5 %</td>"), std::string::npos) << html;
  EXPECT_NE(html.find("<td>12.5</td>"), std::string::npos);
}

TEST(Report, DrawsEveryChartInHeadlessChromium) {
  TempDir dir;
  write_run(dir.file("stage0-fp32"), 0, false, 1000);
  write_run(dir.file("stage3-bf16"), 3, true, 800);
  const std::string html = dir.file("report.html");
  const auto r =
      run_deepshard({"report", dir.file("stage0-fp32"), dir.file("stage3-bf16"), "-o", html});
  ASSERT_EQ(r.exit_status, 0) << r.output;
  const std::string page = read_file(html);
  EXPECT_EQ(page.find("http://"), std::string::npos);  // nothing to fetch: self-contained
  EXPECT_EQ(page.find("https://cdn"), std::string::npos);
  EXPECT_NE(page.find("<td>zero_optimization.stage</td><td>0</td><td>3</td>"), std::string::npos);
  if (!std::filesystem::exists(kChromium))
    GTEST_SKIP() << "chromium is not installed (apt-get install chromium): browser check skipped";

  const std::vector<std::string> flags = {"--headless",
                                          "--no-sandbox",
                                          "--disable-gpu",
                                          "--no-first-run",
                                          "--disable-background-networking",
                                          "--disable-component-update",
                                          "--disable-sync",
                                          "--user-data-dir=" + dir.file("chromium-profile"),
                                          "--window-size=1360,1300"};
  auto args = flags;
  args.push_back("--dump-dom");
  args.push_back("file://" + html);
  const auto dom = run_exe(kChromium, args, 120);
  ASSERT_EQ(dom.exit_status, 0) << dom.output;
  const std::string open = "<pre id=\"ds-check\">", close = "</pre>";
  const auto at = dom.output.find(open);
  ASSERT_NE(at, std::string::npos) << "the page's check did not run:\n" << dom.output;
  const auto end = dom.output.find(close, at);
  const auto check =
      nlohmann::json::parse(dom.output.substr(at + open.size(), end - at - open.size()));
  EXPECT_EQ(check.at("errors"), nlohmann::json::array()) << check.dump();
  EXPECT_EQ(check.at("blank"), nlohmann::json::array()) << check.dump();
  EXPECT_EQ(check.at("drawn").size(), 6u) << check.dump();
  EXPECT_EQ(check.at("charts"), 6);
  EXPECT_EQ(dom.output.find("Uncaught"), std::string::npos) << dom.output;

  const std::string shot = binary_dir() + "/report_test_screenshot.png";
  std::filesystem::remove(shot);
  args = flags;
  args.push_back("--screenshot=" + shot);
  args.push_back("file://" + html);
  const auto s = run_exe(kChromium, args, 120);
  ASSERT_EQ(s.exit_status, 0) << s.output;
  ASSERT_TRUE(std::filesystem::exists(shot)) << s.output;
  EXPECT_GT(std::filesystem::file_size(shot), 10000u);
}

}  // namespace report_test
}  // namespace deepshard::testing
