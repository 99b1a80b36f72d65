// DeepSpeed's flops profiler (deepspeed/profiling/flops_profiler) for libtorch modules: while
// started, every ATen operator this thread runs is observed (at::RecordFunction callbacks, the hook
// libtorch's own profiler uses), its FLOPs and MACs computed from its input shapes with DeepSpeed's
// rules (op_flops.h) and its time measured; each operator is charged to a module of the model's
// declared structure (named_modules): the module whose parameters it takes, or, for
// parameter-free operators (attention matmuls, softmax, GELU, residual adds), the innermost module
// enclosing the parameterised operators before and after it. A weight used again later (a head tied
// to the embedding) is parameter-free there. Totals are those of the observed forward.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace torch::nn {
class Module;
}

namespace deepshard::profiling {

struct ModuleProfile {
  std::string name;   // qualified: "" for the model, "h.0.attn.c_attn"
  std::string type;   // class name without namespace or "Impl": "Linear", "Block"
  std::string extra;  // libtorch's description of its options: "in_features=384, ..."
  int depth = 0;
  int parent = -1;
  std::vector<int> children;
  int64_t params = 0;           // its own and its submodules'
  int64_t flops = 0, macs = 0;  // forward, its own operators and its submodules'
  double seconds = 0.0;         // time of those operators (the model: the whole forward)
};

class FlopsProfiler {
 public:
  explicit FlopsProfiler(const torch::nn::Module& model);
  ~FlopsProfiler();
  FlopsProfiler(const FlopsProfiler&) = delete;
  FlopsProfiler& operator=(const FlopsProfiler&) = delete;

  // Observes this thread's operators from start() to stop(); counts add up over several windows.
  void start();
  void stop();

  const std::vector<ModuleProfile>& modules() const;  // pre-order; [0] is the model
  int64_t total_flops() const;
  int64_t total_macs() const;
  int64_t total_params() const;
  double total_seconds() const;  // wall time between start() and stop()

  struct State;  // the implementation's (the operator callbacks reach it)

 private:
  std::unique_ptr<State> state_;
};

// What the report says about the run around the profiled forward.
struct ProfileContext {
  int64_t profile_step = 1;
  int world_size = 1;
  int64_t micro_batch_size = 0;  // batch size per GPU
  double backward_seconds = -1;  // of the profiled micro-step; < 0: not measured
  double step_seconds = -1;      // the optimizer step's; < 0: not measured
};

struct ReportOptions {
  int64_t module_depth = -1;  // aggregated profile: depths shown (-1: all but the innermost)
  int64_t top_modules = 1;
  bool detailed = true;  // the model printed with each module's profile
};

// DeepSpeed's print_model_profile layout: summary, aggregated profile per depth, detailed tree.
std::string format_profile(const FlopsProfiler& profiler, const ProfileContext& context,
                           const ReportOptions& options);

// DeepSpeed's number formatting: 2 decimals and a unit prefix (T, G, M, K, m, u), %g.
std::string number_to_string(double value);

}  // namespace deepshard::profiling
