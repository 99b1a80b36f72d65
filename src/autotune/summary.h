// The end of a tuning: DeepSpeed's summary table (the best experiment of each tuning space and the
// global best, also results_dir/summary.txt) and the autotuning page results_dir/report.html
// (monitor/autotuning_report.h). Private to the autotune layer.
#pragma once

#include <string>
#include <vector>

#include "autotune/results_store.h"

namespace deepshard::autotune {

// | tuning_space | num_experiments | best_metric_val | best_exp_name |, one line per space that
// ran something, then "global".
std::string summary_table(const std::vector<Row>& rows, const Row& best, const std::string& metric);

// summary.txt and report.html in `results_dir`.
void write_summary(const std::string& results_dir, const std::vector<Row>& rows, const Row& best,
                   const std::string& metric);

}  // namespace deepshard::autotune
