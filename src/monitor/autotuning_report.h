// The autotuning page of the HTML report: results_dir/report.html, written by the tuner (and
// `deepshard report` of a results_dir). One self-contained page (Chart.js inlined): the metric
// against the micro-batch size, one line per ZeRO stage (the micro-batch experiments; knob
// experiments as points), the measured peak RSS against the estimate, and the table of every
// experiment (config difference from the user's, metric, peak RSS, estimate, status and reason).
// Its check script records in <pre id="ds-check"> which charts drew, as the run report's does.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace deepshard::monitor {

// `rows`: results.jsonl's records; `best`: the best experiment's name; `metric`: its metric name
// ("throughput", "latency" or "FLOPS").
std::string render_autotuning_html(const std::vector<nlohmann::json>& rows, const std::string& best,
                                   const std::string& metric);

}  // namespace deepshard::monitor
