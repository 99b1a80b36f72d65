// The summary table and the report page (summary.h).
#include "autotune/summary.h"

#include <cstdio>
#include <map>

#include "monitor/autotuning_report.h"

namespace deepshard::autotune {

std::string summary_table(const std::vector<Row>& rows, const Row& best,
                          const std::string& metric) {
  struct Space {
    int experiments = 0;
    const Row* best = nullptr;
  };
  std::map<std::string, Space> spaces;
  int total = 0;
  for (const Row& r : rows) {
    if (r.experiment.space == "profile") continue;
    Space& s = spaces[r.experiment.space];
    ++s.experiments;
    ++total;
    if (r.result.status != TrialStatus::kRan) continue;
    if (!s.best ||
        better(metric_value(r.result, metric), metric_value(s.best->result, metric), metric))
      s.best = &r;
  }
  std::string out =
      "| tuning_space | num_experiments | best_metric_val | best_exp_name |\n"
      "| :----------- | --------------: | --------------: | :------------ |\n";
  char line[256];
  auto add = [&](const std::string& space, int n, const Row* r) {
    std::snprintf(line, sizeof line, "| %-12s | %15d | %15.6g | %-13s |\n", space.c_str(), n,
                  r ? metric_value(r->result, metric) : 0.0, r ? r->experiment.name.c_str() : "-");
    out += line;
  };
  for (const auto& [name, s] : spaces) add(name, s.experiments, s.best);
  add("global", total, &best);
  return out;
}

void write_summary(const std::string& results_dir, const std::vector<Row>& rows, const Row& best,
                   const std::string& metric) {
  write_text_file(results_dir + "/summary.txt", summary_table(rows, best, metric));
  std::vector<nlohmann::json> json_rows;
  for (const Row& r : rows) json_rows.push_back(row_json(r));
  write_text_file(results_dir + "/report.html",
                  monitor::render_autotuning_html(json_rows, best.experiment.name, metric));
}

}  // namespace deepshard::autotune
