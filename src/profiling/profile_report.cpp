// format_profile: DeepSpeed's print_model_profile text (summary, "Aggregated Profile per GPU",
// "Detailed Profile per GPU") from a FlopsProfiler's module tree.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <utility>

#include "profiling/flops_profiler.h"

namespace deepshard::profiling {
namespace {

// Python's "{:g}" of round(x, 2).
std::string g2(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", std::round(x * 100.0) / 100.0);
  return buf;
}

std::string params_to_string(double n) {
  std::string s = number_to_string(n);
  for (char& c : s)
    if (c == 'G') c = 'B';
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}
std::string macs_to_string(double n) { return number_to_string(n) + "MACs"; }
std::string flops_to_string(double n) { return number_to_string(n) + "FLOPS"; }
std::string duration_to_string(double s) { return number_to_string(s) + "s"; }
double pct(double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0.0; }

// '{:<70}  {:<8}'
void line(std::ostringstream& os, const std::string& label, const std::string& value) {
  char buf[512];
  std::snprintf(buf, sizeof buf, "%-70s  %-8s\n", label.c_str(), value.c_str());
  os << buf;
}

// Python's repr of {name: value, ...} with string values, in the given order.
std::string dict_repr(const std::vector<std::pair<std::string, std::string>>& items) {
  std::string s = "{";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) s += ", ";
    s += "'" + items[i].first + "': '" + items[i].second + "'";
  }
  return s + "}";
}

void aggregated(std::ostringstream& os, const std::vector<ModuleProfile>& modules,
                const ReportOptions& options) {
  // depth -> type -> (macs, params, seconds), types in first-seen order as Python dicts keep them.
  std::map<int, std::vector<std::pair<std::string, std::array<double, 3>>>> info;
  for (const ModuleProfile& m : modules) {
    auto& level = info[m.depth];
    auto it =
        std::find_if(level.begin(), level.end(), [&](const auto& e) { return e.first == m.type; });
    if (it == level.end()) {
      level.push_back({m.type, {0, 0, 0}});
      it = level.end() - 1;
    }
    it->second[0] += static_cast<double>(m.macs);
    it->second[1] += static_cast<double>(m.params);
    it->second[2] += m.seconds;
  }
  const int64_t depth =
      options.module_depth == -1 ? static_cast<int64_t>(info.size()) - 1 : options.module_depth;
  os << "Top " << options.top_modules
     << " modules in terms of params, MACs or fwd latency at different model depths:\n";
  for (int64_t d = 0; d < depth && info.count(static_cast<int>(d)); ++d) {
    auto level = info[static_cast<int>(d)];
    const size_t n = std::min<size_t>(static_cast<size_t>(options.top_modules), level.size());
    auto top = [&](int k, std::string (*fmt)(double)) {
      auto sorted = level;
      std::stable_sort(sorted.begin(), sorted.end(),
                       [k](const auto& a, const auto& b) { return a.second[k] > b.second[k]; });
      std::vector<std::pair<std::string, std::string>> items;
      for (size_t i = 0; i < n; ++i) items.push_back({sorted[i].first, fmt(sorted[i].second[k])});
      return dict_repr(items);
    };
    os << "depth " << d << ":\n";
    os << "    params      - " << top(1, params_to_string) << "\n";
    os << "    MACs        - " << top(0, macs_to_string) << "\n";
    os << "    fwd latency - " << top(2, duration_to_string) << "\n";
  }
}

void detailed(std::ostringstream& os, const std::vector<ModuleProfile>& modules, int id,
              const std::string& indent, const std::string& prefix) {
  const ModuleProfile& m = modules[id];
  const ModuleProfile& total = modules[0];
  std::string profile =
      params_to_string(static_cast<double>(m.params)) + " = " +
      g2(pct(static_cast<double>(m.params), static_cast<double>(total.params))) + "% Params, " +
      macs_to_string(static_cast<double>(m.macs)) + " = " +
      g2(pct(static_cast<double>(m.macs), static_cast<double>(total.macs))) + "% MACs, " +
      duration_to_string(m.seconds) + " = " + g2(pct(m.seconds, total.seconds)) + "% latency, " +
      flops_to_string(m.seconds > 0 ? static_cast<double>(m.flops) / m.seconds : 0);
  if (!m.extra.empty()) profile += ", " + m.extra;
  if (m.children.empty()) {
    os << indent << prefix << m.type << "(" << profile << ")\n";
    return;
  }
  os << indent << prefix << m.type << "(\n" << indent << "  " << profile << "\n";
  for (int c : m.children) {
    const std::string& child = modules[c].name;
    detailed(os, modules, c, indent + "  ", "(" + child.substr(child.rfind('.') + 1) + "): ");
  }
  os << indent << ")\n";
}

}  // namespace

std::string number_to_string(double num) {
  double magnitude = 1;
  const char* units = "";
  if (num >= 1e12)
    magnitude = 1e12, units = "T";
  else if (num >= 1e9)
    magnitude = 1e9, units = "G";
  else if (num >= 1e6)
    magnitude = 1e6, units = "M";
  else if (num >= 1e3)
    magnitude = 1e3, units = "K";
  else if (num >= 1 || num == 0)
    magnitude = 1, units = "";
  else if (num >= 1e-3)
    magnitude = 1e-3, units = "m";
  else
    magnitude = 1e-6, units = "u";
  return g2(num / magnitude) + " " + units;
}

std::string format_profile(const FlopsProfiler& profiler, const ProfileContext& ctx,
                           const ReportOptions& options) {
  const auto& modules = profiler.modules();
  const double flops = static_cast<double>(profiler.total_flops());
  const double fwd = profiler.total_seconds();
  std::ostringstream os;
  os << "\n-------------------------- DeepSpeed Flops Profiler --------------------------\n";
  os << "Profile Summary at step " << ctx.profile_step << ":\n";
  os << "Notations:\n"
        "data parallel size (dp_size), model parallel size(mp_size),\n"
        "number of parameters (params), number of multiply-accumulate operations(MACs),\n"
        "number of floating-point operations (flops), floating-point operations per second "
        "(FLOPS),\n"
        "fwd latency (forward propagation latency), bwd latency (backward propagation latency),\n"
        "step (weights update latency), iter latency (sum of fwd, bwd and step latency)\n\n";
  line(os, "world size: ", std::to_string(ctx.world_size));
  line(os, "data parallel size: ", std::to_string(ctx.world_size));
  line(os, "model parallel size: ", "1");
  line(os, "batch size per GPU: ", std::to_string(ctx.micro_batch_size));
  line(os, "params per GPU: ", params_to_string(static_cast<double>(profiler.total_params())));
  line(os, "params of model = params per GPU * mp_size: ",
       params_to_string(static_cast<double>(profiler.total_params())));
  line(os, "fwd MACs per GPU: ", macs_to_string(static_cast<double>(profiler.total_macs())));
  line(os, "fwd flops per GPU: ", number_to_string(flops));
  line(os, "fwd flops of model = fwd flops per GPU * mp_size: ", number_to_string(flops));
  line(os, "fwd latency: ", duration_to_string(fwd));
  line(os, "fwd FLOPS per GPU = fwd flops per GPU / fwd latency: ",
       flops_to_string(fwd > 0 ? flops / fwd : 0));
  if (ctx.backward_seconds >= 0 && ctx.step_seconds >= 0) {
    const double bwd = ctx.backward_seconds, iter = fwd + bwd + ctx.step_seconds;
    line(os, "bwd latency: ", duration_to_string(bwd));
    line(os, "bwd FLOPS per GPU = 2 * fwd flops per GPU / bwd latency: ",
         flops_to_string(bwd > 0 ? 2 * flops / bwd : 0));
    line(os, "fwd+bwd FLOPS per GPU = 3 * fwd flops per GPU / (fwd+bwd latency): ",
         flops_to_string(fwd + bwd > 0 ? 3 * flops / (fwd + bwd) : 0));
    line(os, "step latency: ", duration_to_string(ctx.step_seconds));
    line(os, "iter latency: ", duration_to_string(iter));
    line(os, "FLOPS per GPU = 3 * fwd flops per GPU / iter latency: ",
         flops_to_string(iter > 0 ? 3 * flops / iter : 0));
    line(os, "samples/second: ",
         g2(iter > 0 ? static_cast<double>(ctx.micro_batch_size * ctx.world_size) / iter : 0));
    line(os, "fwd latency share of the iteration: ", g2(pct(fwd, iter)) + "%");
  }
  os << "\n----------------------------- Aggregated Profile per GPU "
        "-----------------------------\n";
  aggregated(os, modules, options);
  if (options.detailed) {
    os << "\n------------------------------ Detailed Profile per GPU "
          "------------------------------\n";
    os << "Each module profile is listed after its name in the following order: \n"
          "params, percentage of total params, MACs, percentage of total MACs, fwd latency, "
          "percentage of total fwd latency, fwd FLOPS\n";
    os << "\nNote: 1. A module can have operators of its own (attention matmuls, softmax, residual "
          "adds) besides its submodules: they make up the difference between a parent's MACs (or "
          "latency) and the sum of its submodules'.\n2. Number of floating-point operations is a "
          "theoretical estimation, thus FLOPS computed using that could be larger than the maximum "
          "system throughput.\n3. The fwd latency listed in the top module's profile is the whole "
          "forward; a submodule's is the time of its operators.\n\n";
    detailed(os, modules, 0, "", "");
  }
  os << "------------------------------------------------------------------------------\n";
  return os.str();
}

}  // namespace deepshard::profiling
