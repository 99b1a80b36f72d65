// Implementation of html_report.h: the page is a fixed template, the runs' records as JSON, and
// the chart definitions in the page's own script.
#include "monitor/html_report.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "deepshard/util/error.h"
#include "monitor/html_text.h"
#include "monitor/readable_number.h"

namespace deepshard::monitor {
namespace {

void flatten(const nlohmann::json& v, const std::string& path,
             std::map<std::string, std::string>& out) {
  if (v.is_object() && !v.empty()) {
    for (const auto& [k, child] : v.items()) flatten(child, path.empty() ? k : path + "." + k, out);
  } else {
    out[path] = v.dump();
  }
}

// The page's script: chart definitions over RUNS, drawn without animation, then checked.
const char* kPageScript = R"js(
const MiB = 1 << 20;
const PALETTE = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2',
                 '#7f7f7f', '#bcbd22', '#17becf'];
function value(r, key) {  // "memory.parameters" reads a nested field
  const dot = key.indexOf('.');
  return dot < 0 ? r[key] : (r[key.slice(0, dot)] || {})[key.slice(dot + 1)];
}
function series(run, key, scale) {
  const pts = [];
  for (const r of run.metrics) {
    let v = value(r, key);
    if (key === 'comm_wait_share' && v === undefined && r.step_time_s > 0)
      v = r.comm_wait_s / r.step_time_s;
    if (typeof v === 'boolean') v = v ? 1 : 0;
    if (typeof v === 'number' && isFinite(v)) pts.push({x: r.step, y: v / (scale || 1)});
  }
  return pts;
}
function memKeys() {  // metrics.jsonl "memory": bytes per ledger category, activations, rss
  const keys = new Set();
  for (const run of RUNS)
    for (const r of run.metrics)
      for (const k of Object.keys(r.memory || {})) keys.add(k);
  const lines = [...keys].map(k => ['memory.' + k, k.replace(/_/g, ' '), MiB]);
  return keys.has('rss') ? lines : lines.concat([['rss_bytes', 'rss', MiB]]);
}
const CHARTS = [
  {id: 'loss', title: 'Loss', y: 'loss', lines: [['loss', 'train'], ['val_loss', 'validation']],
   y2: 'accuracy', lines2: [['val_accuracy', 'validation accuracy']]},
  {id: 'lr', title: 'Learning rate', y: 'lr', lines: [['lr', 'lr']]},
  {id: 'throughput', title: 'Throughput', y: 'tokens/s', lines: [['tokens_per_s', 'tokens/s']],
   y2: 'MFU', lines2: [['mfu', 'MFU']]},
  {id: 'memory', title: 'Memory per rank 0 (MiB)', y: 'MiB', lines: memKeys()},
  {id: 'comm', title: 'Comm wait share of the step', y: 'share',
   lines: [['comm_wait_share', 'comm wait share']]},
  {id: 'scale', title: 'Loss scale and skipped steps', y: 'loss scale',
   lines: [['loss_scale', 'loss scale']], y2: 'skipped', lines2: [['skipped', 'skipped']]},
];
function datasets(chart) {
  const out = [];
  let color = 0;
  const add = (lines, axis) => {
    for (const [key, label, scale] of lines || []) {
      RUNS.forEach((run, i) => {
        const data = series(run, key, scale);
        if (!data.length) return;
        const c = PALETTE[color++ % PALETTE.length];
        out.push({label: (RUNS.length > 1 ? run.name + ': ' : '') + label, data, yAxisID: axis,
                  borderColor: c, backgroundColor: c, borderWidth: 1.5,
                  pointRadius: data.length < 30 ? 2.5 : 0, showLine: true,
                  borderDash: i % 2 ? [6, 3] : [], stepped: axis === 'y2' && key === 'skipped'});
      });
    }
  };
  add(chart.lines, 'y');
  add(chart.lines2, 'y2');
  return out;
}
const drawn = [], blank = [];
for (const def of CHARTS) {
  const canvas = document.getElementById('chart-' + def.id);
  const ds = datasets(def);
  const scales = {x: {type: 'linear', title: {display: true, text: 'step'}},
                  y: {title: {display: true, text: def.y}}};
  if (ds.some(d => d.yAxisID === 'y2'))
    scales.y2 = {position: 'right', title: {display: true, text: def.y2},
                 grid: {drawOnChartArea: false}};
  new Chart(canvas, {type: 'scatter', data: {datasets: ds},
                     options: {animation: false, responsive: false, parsing: false,
                               plugins: {title: {display: true, text: def.title},
                                         legend: {position: 'bottom'}},
                               scales}});
  const px = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
  let painted = 0;
  for (let i = 3; i < px.length; i += 4) if (px[i] !== 0) painted++;
  (painted > 0 && ds.length > 0 ? drawn : blank).push(def.id + ':' + ds.length + ' series');
}
document.getElementById('ds-check').textContent =
    JSON.stringify({charts: CHARTS.length, drawn, blank, errors: window.dsErrors});
)js";

}  // namespace

ReportRun load_report_run(const std::string& run_dir) {
  namespace fs = std::filesystem;
  ReportRun run;
  run.name = fs::path(run_dir).lexically_normal().filename().string();
  if (run.name.empty())
    run.name = fs::path(run_dir).lexically_normal().parent_path().filename().string();
  const std::string metrics = (fs::path(run_dir) / "metrics.jsonl").string();
  std::ifstream in(metrics);
  DS_CHECK(in.good(), IoError, metrics, ": cannot read (is ", run_dir, " a run folder?)");
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    try {
      run.metrics.push_back(nlohmann::json::parse(line));
    } catch (const nlohmann::json::exception& e) {
      throw IoError(metrics + ":" + std::to_string(n) + ": not JSON: " + e.what());
    }
  }
  const std::string summary = (fs::path(run_dir) / "summary.json").string();
  run.summary = nlohmann::json::object();
  if (fs::exists(summary)) {
    std::ifstream s(summary);
    try {
      run.summary = nlohmann::json::parse(s);
    } catch (const nlohmann::json::exception& e) {
      throw IoError(summary + ": not JSON: " + e.what());
    }
  }
  return run;
}

std::vector<std::pair<std::string, std::vector<std::string>>> config_differences(
    const std::vector<ReportRun>& runs) {
  std::vector<std::map<std::string, std::string>> flat(runs.size());
  std::set<std::string> keys;
  for (size_t i = 0; i < runs.size(); ++i) {
    flatten(runs[i].summary.value("config", nlohmann::json::object()), "", flat[i]);
    for (const auto& [k, v] : flat[i]) keys.insert(k);
  }
  std::vector<std::pair<std::string, std::vector<std::string>>> out;
  for (const std::string& key : keys) {
    std::vector<std::string> values;
    for (const auto& f : flat) values.push_back(f.count(key) ? f.at(key) : "-");
    bool differ = false;
    for (const auto& v : values) differ |= v != values[0];
    if (differ) out.push_back({key, values});
  }
  return out;
}

std::string render_report_html(const std::vector<ReportRun>& runs) {
  DS_CHECK(!runs.empty(), Error, "report: no run folders given");
  nlohmann::json data = nlohmann::json::array();
  for (const auto& r : runs) data.push_back({{"name", r.name}, {"metrics", r.metrics}});
  std::string h =
      page_head("deepshard report",
                "table{border-collapse:collapse;margin:8px 0 16px}"
                "td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px;text-align:left}"
                ".charts{display:flex;flex-wrap:wrap;gap:12px}"
                "canvas{border:1px solid #ddd}#ds-check{display:none}");
  h += "<h1>deepshard report</h1>\n<table>\n<tr><th>run</th><th>steps</th><th>final loss</th>"
       "<th>final val loss</th><th>val accuracy</th><th>majority-class baseline</th>"
       "<th>mean tokens/s</th><th>mean samples/s</th><th>comm wait share</th><th>ranks</th></tr>\n";
  for (const auto& r : runs) {
    // Numbers as a person reads them ("2.383", "2,061", "2.4 %"); anything else as written.
    auto cell = [&](const char* key, std::string (*format)(double)) {
      if (!r.summary.contains(key)) return std::string("-");
      const nlohmann::json& v = r.summary.at(key);
      return html_escape(v.is_number() ? format(v.get<double>()) : v.dump());
    };
    h += "<tr><td>" + html_escape(r.name) + "</td><td>" + std::to_string(r.metrics.size()) +
         "</td><td>" + cell("final_loss", readable_number) + "</td><td>" +
         cell("final_val_loss", readable_number) + "</td><td>" +
         cell("final_val_accuracy", readable_share) + "</td><td>" +
         cell("majority_baseline", readable_share) + "</td><td>" +
         cell("mean_tokens_per_s", readable_number) + "</td><td>" +
         cell("mean_samples_per_s", readable_number) + "</td><td>" +
         cell("comm_wait_share", readable_share) + "</td><td>" +
         cell("world_size", readable_number) + "</td></tr>\n";
  }
  h += "</table>\n";
  if (runs.size() > 1) {
    const auto diffs = config_differences(runs);
    h += "<h2>Config differences</h2>\n";
    if (diffs.empty()) {
      h += "<p>The runs' configs are the same.</p>\n";
    } else {
      h += "<table id=\"config-differences\">\n<tr><th>key</th>";
      for (const auto& r : runs) h += "<th>" + html_escape(r.name) + "</th>";
      h += "</tr>\n";
      for (const auto& [key, values] : diffs) {
        h += "<tr><td>" + html_escape(key) + "</td>";
        for (const auto& v : values) h += "<td>" + html_escape(v) + "</td>";
        h += "</tr>\n";
      }
      h += "</table>\n";
    }
  }
  h += "<div class=\"charts\">\n";
  for (const char* id : {"loss", "lr", "throughput", "memory", "comm", "scale"})
    h += std::string("<canvas id=\"chart-") + id + "\" width=\"640\" height=\"360\"></canvas>\n";
  h += "</div>\n<pre id=\"ds-check\"></pre>\n";
  h += "<script>\nconst RUNS = " + script_json(data) + ";\n" + kPageScript + "</script>\n";
  h += "</body>\n</html>\n";
  return h;
}

}  // namespace deepshard::monitor
