// `deepshard report RUN_DIR [RUN_DIR ...] [-o FILE]`: writes the HTML report of the runs
// (monitor/html_report.h) and prints its path.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "deepshard/util/error.h"
#include "monitor/html_report.h"

namespace deepshard::cli {
namespace {

const char* kReportUsage =
    "usage: deepshard report RUN_DIR [RUN_DIR ...] [-o FILE]\n"
    "\n"
    "Writes one self-contained HTML page (no network needed to open it) with plots over steps of\n"
    "each run folder's metrics.jsonl: loss and validation loss, learning rate, tokens/s (and "
    "MFU),\n"
    "memory per category and RSS, comm wait share, loss scale and skipped steps. Several runs are\n"
    "overlaid and the differences of their configs (summary.json) listed.\n"
    "-o FILE: where to write it (default: report.html in the first RUN_DIR).\n";

}  // namespace

int run_report_command(const Args& args) {
  Args normalized;
  for (const auto& a : args) normalized.push_back(a == "-o" ? "--output" : a);
  ArgParser parser({"output"}, {"help"});
  parser.parse(normalized);
  if (parser.print_help_if_asked(kReportUsage)) return 0;
  const auto& dirs = parser.positional();
  DS_CHECK(!dirs.empty(), UsageError, "report: give at least one run folder");
  std::vector<monitor::ReportRun> runs;
  for (const auto& d : dirs) runs.push_back(monitor::load_report_run(d));
  const std::string out =
      parser.get("output").value_or((std::filesystem::path(dirs[0]) / "report.html").string());
  const std::string html = monitor::render_report_html(runs);
  std::ofstream f(out, std::ios::trunc);
  DS_CHECK(f.good(), IoError, out, ": cannot open for writing");
  f << html;
  f.close();
  DS_CHECK(f.good(), IoError, out, ": write failed");
  std::printf("%s\n", std::filesystem::absolute(out).lexically_normal().c_str());
  return 0;
}

}  // namespace deepshard::cli
