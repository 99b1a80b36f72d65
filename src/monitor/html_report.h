// `deepshard report`: one self-contained HTML page (Chart.js inlined, the runs' data embedded) with
// plots over steps of one or several run folders (metrics.jsonl + summary.json): loss and
// validation loss, learning rate, tokens/s (and MFU when logged), memory per category and RSS,
// comm wait share, loss scale and skipped steps; several runs are overlaid and the differences of
// their configs listed. A script in the page checks that every chart drew and records JavaScript
// errors in <pre id="ds-check"> (what the browser test reads).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace deepshard::monitor {

struct ReportRun {
  std::string name;  // the folder's name
  std::vector<nlohmann::json> metrics;
  nlohmann::json summary;  // {} when absent
};

// Reads RUN_DIR/metrics.jsonl (required) and summary.json. Throws IoError naming the file.
ReportRun load_report_run(const std::string& run_dir);

// Config keys (dotted paths) whose values differ between the runs, with each run's value ("-" when
// a run lacks the key).
std::vector<std::pair<std::string, std::vector<std::string>>> config_differences(
    const std::vector<ReportRun>& runs);

std::string render_report_html(const std::vector<ReportRun>& runs);

// The vendored Chart.js (third_party/chartjs, MIT), compiled in.
const std::string& chartjs_source();

}  // namespace deepshard::monitor
