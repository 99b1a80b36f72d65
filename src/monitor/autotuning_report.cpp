// The autotuning page (autotuning_report.h): the rows as JSON in the page, charts drawn by the
// page's script, the table rendered here.
#include "monitor/autotuning_report.h"

#include <cstdio>

#include "monitor/html_text.h"

namespace deepshard::monitor {
namespace {

const char* kScript = R"js(
const MiB = 1 << 20;
const PALETTE = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b'];
const ran = ROWS.filter(r => r.status === 'ran' && r.space !== 'profile');
const metricOf = r => METRIC === 'latency' ? r.latency : METRIC === 'FLOPS' ? r.FLOPS_per_gpu
                                                                          : r.throughput;
function stageSets() {
  const out = [];
  for (let stage = 0; stage <= 3; ++stage) {
    const pts = ran.filter(r => r.stage === stage)
                   .map(r => ({x: r.train_micro_batch_size_per_gpu, y: metricOf(r), name: r.name}))
                   .sort((a, b) => a.x - b.x);
    if (!pts.length) continue;
    const c = PALETTE[stage % PALETTE.length];
    out.push({label: 'ZeRO stage ' + stage, data: pts, borderColor: c, backgroundColor: c,
              showLine: false, pointRadius: 4});
  }
  const base = ran.filter(r => r.space === 'baseline')
                  .map(r => ({x: r.train_micro_batch_size_per_gpu, y: metricOf(r), name: r.name}));
  if (base.length)
    out.push({label: 'baseline (your config)', data: base, borderColor: '#000',
              backgroundColor: '#000', pointStyle: 'rectRot', pointRadius: 7, showLine: false});
  return out;
}
function memorySets() {
  const pts = ROWS.filter(r => r.memory_estimate_bytes > 0 && r.peak_rss_bytes > 0)
                  .map(r => ({x: r.memory_estimate_bytes / MiB, y: r.peak_rss_bytes / MiB,
                              name: r.name}));
  const hi = Math.max(1, ...pts.map(p => Math.max(p.x, p.y)));
  return [{label: 'peak RSS against the estimate (MiB)', data: pts, borderColor: '#1f77b4',
           backgroundColor: '#1f77b4', showLine: false, pointRadius: 4},
          {label: 'equal', data: [{x: 0, y: 0}, {x: hi, y: hi}], borderColor: '#aaa',
           pointRadius: 0, showLine: true, borderDash: [4, 4]}];
}
const CHARTS = [
  {id: 'metric', title: METRIC + ' against the micro-batch size, by ZeRO stage', x: 'micro-batch per rank',
   y: METRIC, sets: stageSets()},
  {id: 'memory', title: 'Measured peak RSS per rank against the estimate', x: 'estimate (MiB)',
   y: 'peak RSS (MiB)', sets: memorySets()},
];
const drawn = [], blank = [];
for (const def of CHARTS) {
  const canvas = document.getElementById('chart-' + def.id);
  new Chart(canvas, {type: 'scatter', data: {datasets: def.sets},
    options: {animation: false, responsive: false, parsing: false,
              plugins: {title: {display: true, text: def.title}, legend: {position: 'bottom'},
                        tooltip: {callbacks: {label: c => (c.raw.name || '') + ' ' + c.raw.y}}},
              scales: {x: {type: 'linear', title: {display: true, text: def.x}},
                       y: {title: {display: true, text: def.y}}}}});
  const px = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
  let painted = 0;
  for (let i = 3; i < px.length; i += 4) if (px[i] !== 0) painted++;
  const points = def.sets.reduce((n, s) => n + s.data.length, 0);
  (painted > 0 && points > 0 ? drawn : blank).push(def.id + ':' + def.sets.length + ' series');
}
document.getElementById('ds-check').textContent =
    JSON.stringify({charts: CHARTS.length, drawn, blank, errors: window.dsErrors});
)js";

std::string mib(const nlohmann::json& row, const char* key) {
  const double bytes = row.value(key, 0.0);
  if (bytes <= 0) return "-";
  char text[32];
  std::snprintf(text, sizeof text, "%.0f", bytes / (1 << 20));
  return text;
}

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", v);
  return text;
}

}  // namespace

std::string render_autotuning_html(const std::vector<nlohmann::json>& rows, const std::string& best,
                                   const std::string& metric) {
  std::string h =
      page_head("deepshard autotuning",
                "table{border-collapse:collapse;margin:8px 0 16px}"
                "td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px;"
                "text-align:left;vertical-align:top}"
                "tr.best{background:#e8f5e9}.charts{display:flex;flex-wrap:wrap;gap:12px}"
                "canvas{border:1px solid #ddd}#ds-check{display:none}");
  h += "<h1>deepshard autotuning</h1>\n<p>Best: <b>" + html_escape(best) + "</b> by " +
       html_escape(metric) + ". " + std::to_string(rows.size()) + " experiments.</p>\n";
  h +=
      "<div class=\"charts\">\n<canvas id=\"chart-metric\" width=\"640\" height=\"380\"></canvas>\n"
      "<canvas id=\"chart-memory\" width=\"520\" height=\"380\"></canvas>\n</div>\n";
  h += "<table id=\"experiments\">\n<tr><th>experiment</th><th>status</th><th>config difference "
       "from yours</th><th>" +
       html_escape(metric) +
       "</th><th>samples/s</th><th>latency (ms)</th><th>peak RSS (MiB)</th><th>estimate "
       "(MiB)</th><th>wall (s)</th><th>reason</th></tr>\n";
  for (const auto& r : rows) {
    const std::string name = r.value("name", "");
    const bool ran = r.value("status", "") == "ran";
    std::string diff;
    const nlohmann::json config_diff = r.value("config_diff", nlohmann::json::object());
    for (const auto& [k, v] : config_diff.items())
      diff += (diff.empty() ? "" : "<br>") + html_escape(k + " = " + v.dump());
    const double value = metric == "latency" ? r.value("latency", 0.0)
                         : metric == "FLOPS" ? r.value("FLOPS_per_gpu", 0.0)
                                             : r.value("throughput", 0.0);
    h += std::string("<tr") + (name == best ? " class=\"best\"" : "") + "><td>" +
         html_escape(name) + "</td><td>" + html_escape(r.value("status", "")) +
         (r.value("reused", false) ? " (reused)" : "") + "</td><td>" + diff + "</td><td>" +
         (ran ? number(value) : "-") + "</td><td>" +
         (ran ? number(r.value("throughput", 0.0)) : "-") + "</td><td>" +
         (ran ? number(r.value("latency", 0.0)) : "-") + "</td><td>" + mib(r, "peak_rss_bytes") +
         "</td><td>" + mib(r, "memory_estimate_bytes") + "</td><td>" +
         number(r.value("wall_s", 0.0)) + "</td><td>" + html_escape(r.value("reason", "")) +
         "</td></tr>\n";
  }
  h += "</table>\n<pre id=\"ds-check\"></pre>\n";
  h += "<script>\nconst ROWS = " + script_json(rows) + ";\nconst METRIC = " + script_json(metric) +
       ";\n" + kScript + "</script>\n</body>\n</html>\n";
  return h;
}

}  // namespace deepshard::monitor
