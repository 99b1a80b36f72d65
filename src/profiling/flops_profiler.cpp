// FlopsProfiler: the module tree from named_modules(), ATen operators observed through a
// thread-local at::RecordFunction callback (only the outermost operator of a nest is counted, so
// linear is not counted again as the addmm it calls), and each operator charged to a module.
#include "profiling/flops_profiler.h"

#include <ATen/record_function.h>
#include <torch/nn/module.h>

#include <chrono>
#include <sstream>
#include <unordered_map>

#include "deepshard/util/error.h"
#include "profiling/op_flops.h"
#include "util/stopwatch.h"

namespace deepshard::profiling {

using Clock = std::chrono::steady_clock;

struct FlopsProfiler::State {
  struct Op {
    detail::OpCount count;
    double seconds = 0.0;
  };

  std::vector<ModuleProfile> modules;
  std::vector<int64_t> own_params, own_flops, own_macs;
  std::vector<double> own_seconds;
  std::unordered_map<const c10::TensorImpl*, int> param_owner;
  int64_t total_params = 0;

  bool running = false;
  at::CallbackHandle handle = 0;
  Clock::time_point window_start;
  double wall_seconds = 0.0;
  // The operator being observed (depth 1) and the nesting depth of operators.
  int depth = 0;
  Clock::time_point op_start;
  detail::OpCount op_count;
  int op_owner = -1;
  // Attribution: the module of the last parameterised operator, the parameter-free operators since
  // then, and modules whose turn is over (their parameters used again later are a tied weight).
  int prev_owner = -1;
  std::vector<Op> pending;
  std::vector<char> closed;

  int owner_of(c10::ArrayRef<const c10::IValue> inputs) const {
    for (const auto& v : inputs) {
      if (!v.isTensor()) continue;
      auto it = param_owner.find(v.toTensor().unsafeGetTensorImpl());
      if (it != param_owner.end() && !closed[it->second]) return it->second;
    }
    return -1;
  }

  bool is_container(int m) const {
    const std::string& t = modules[m].type;
    return t == "ModuleList" || t == "ModuleDict" || t == "Sequential";
  }

  // Where the parameter-free operators between module a's operators and module b's belong (b < 0:
  // the end of the forward): the innermost module enclosing both, except that the modules in a
  // container (the blocks of a ModuleList) keep what follows them (a block's closing residual add).
  int enclosing(int a, int b) const {
    if (a < 0) return 0;
    std::vector<char> is_ancestor(modules.size(), 0);
    for (int m = a; m >= 0; m = modules[m].parent) is_ancestor[m] = 1;
    int lca = b < 0 ? 0 : b;
    while (!is_ancestor[lca]) lca = modules[lca].parent;
    if (a == lca) return lca;
    auto child_towards_a = [&](int ancestor) {
      int child = a;
      while (modules[child].parent != ancestor) child = modules[child].parent;
      return child;
    };
    const int side = child_towards_a(lca);
    if (is_container(lca)) return side;
    if (is_container(side) && side != a) return child_towards_a(side);
    return lca;
  }

  void charge(int m, const Op& op) {
    own_flops[m] += op.count.flops;
    own_macs[m] += op.count.macs;
    own_seconds[m] += op.seconds;
  }

  void flush_pending(int next_owner) {
    const int m = enclosing(prev_owner, next_owner);
    for (const Op& op : pending) charge(m, op);
    pending.clear();
  }

  void finish_op(double seconds) {
    Op op{op_count, seconds};
    // libtorch's C++ linear is matmul + add_(bias): DeepSpeed's linear count (2 MACs) leaves the
    // bias out, so an elementwise operator on a module's own parameter counts no FLOPs.
    if (op_owner >= 0 && op_count.elementwise) op.count.flops = 0;
    if (op_owner < 0) {
      pending.push_back(op);
      return;
    }
    if (prev_owner >= 0 && prev_owner != op_owner) closed[prev_owner] = 1;
    flush_pending(op_owner);
    charge(op_owner, op);
    prev_owner = op_owner;
  }

  void roll_up() {
    for (size_t i = 0; i < modules.size(); ++i) {
      modules[i].params = own_params[i];
      modules[i].flops = own_flops[i];
      modules[i].macs = own_macs[i];
      modules[i].seconds = own_seconds[i];
    }
    for (size_t i = modules.size(); i-- > 1;) {
      ModuleProfile& p = modules[modules[i].parent];
      p.params += modules[i].params;
      p.flops += modules[i].flops;
      p.macs += modules[i].macs;
      p.seconds += modules[i].seconds;
    }
    if (!modules.empty()) modules[0].seconds = wall_seconds;
  }
};

namespace {

thread_local FlopsProfiler::State* t_active = nullptr;

std::unique_ptr<at::ObserverContext> on_op_start(const at::RecordFunction& fn) {
  FlopsProfiler::State* s = t_active;
  if (s == nullptr || ++s->depth != 1) return nullptr;
  s->op_count = detail::op_flops(fn.name(), fn.inputs());
  s->op_owner = s->owner_of(fn.inputs());
  s->op_start = Clock::now();
  return nullptr;
}

void on_op_end(const at::RecordFunction&, at::ObserverContext*) {
  FlopsProfiler::State* s = t_active;
  if (s == nullptr || s->depth-- != 1) return;
  s->finish_op(util::seconds_since(s->op_start));
}

std::string short_type(const std::string& name) {
  std::string t = name.substr(name.rfind("::") == std::string::npos ? 0 : name.rfind("::") + 2);
  if (t.size() > 4 && t.compare(t.size() - 4, 4, "Impl") == 0) t.resize(t.size() - 4);
  return t;
}

// "in_features=384, ..." from libtorch's "torch::nn::Linear(in_features=384, ...)".
std::string options_of(const torch::nn::Module& m) {
  std::ostringstream os;
  m.pretty_print(os);
  const std::string s = os.str();
  const auto open = s.find('('), close = s.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return "";
  return s.substr(open + 1, close - open - 1);
}

}  // namespace

FlopsProfiler::FlopsProfiler(const torch::nn::Module& model) : state_(std::make_unique<State>()) {
  State& s = *state_;
  std::unordered_map<std::string, int> index;
  for (const auto& item : model.named_modules("", /*include_self=*/true)) {
    const std::string& name = item.key();
    const torch::nn::Module& m = *item.value();
    ModuleProfile p;
    p.name = name;
    p.type = short_type(m.name());
    p.extra = m.children().empty() ? options_of(m) : "";
    if (!name.empty()) {
      const auto dot = name.rfind('.');
      const std::string parent = dot == std::string::npos ? "" : name.substr(0, dot);
      auto it = index.find(parent);
      DS_ASSERT(it != index.end(), "flops profiler: module ", name, " comes before its parent");
      p.parent = it->second;
      p.depth = s.modules[p.parent].depth + 1;
    }
    const int id = static_cast<int>(s.modules.size());
    if (p.parent >= 0) s.modules[p.parent].children.push_back(id);
    index[name] = id;
    int64_t own = 0;
    for (const auto& param : m.named_parameters(/*recurse=*/false)) {
      if (s.param_owner.emplace(param.value().unsafeGetTensorImpl(), id).second)
        own += param.value().numel();
    }
    s.own_params.push_back(own);
    s.total_params += own;
    s.modules.push_back(std::move(p));
  }
  s.own_flops.assign(s.modules.size(), 0);
  s.own_macs.assign(s.modules.size(), 0);
  s.own_seconds.assign(s.modules.size(), 0.0);
  s.closed.assign(s.modules.size(), 0);
  s.roll_up();
}

FlopsProfiler::~FlopsProfiler() {
  if (state_ && state_->running) stop();
}

void FlopsProfiler::start() {
  State& s = *state_;
  DS_CHECK(!s.running, Error, "flops profiler: start() while already started");
  DS_CHECK(t_active == nullptr, Error, "flops profiler: another profiler is active on this thread");
  t_active = &s;
  s.running = true;
  s.depth = 0;
  s.prev_owner = -1;
  std::fill(s.closed.begin(), s.closed.end(), 0);
  s.handle = at::addThreadLocalCallback(at::RecordFunctionCallback(on_op_start, on_op_end)
                                            .needsInputs(true)
                                            .scopes({at::RecordScope::FUNCTION}));
  s.window_start = Clock::now();
}

void FlopsProfiler::stop() {
  State& s = *state_;
  DS_CHECK(s.running, Error, "flops profiler: stop() without start()");
  s.wall_seconds += util::seconds_since(s.window_start);
  at::removeCallback(s.handle);
  t_active = nullptr;
  s.running = false;
  s.flush_pending(-1);
  s.roll_up();
}

const std::vector<ModuleProfile>& FlopsProfiler::modules() const { return state_->modules; }
int64_t FlopsProfiler::total_flops() const { return state_->modules[0].flops; }
int64_t FlopsProfiler::total_macs() const { return state_->modules[0].macs; }
int64_t FlopsProfiler::total_params() const { return state_->total_params; }
double FlopsProfiler::total_seconds() const { return state_->wall_seconds; }

}  // namespace deepshard::profiling
