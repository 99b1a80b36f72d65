// The optimizer and scheduler sections (deepspeed-behavior.md §1.5, §1.6): type names matched as
// DeepSpeed does, Adam/AdamW parameters and each scheduler's own parameters checked strictly,
// other optimizers and torch schedulers recognised by name with their parameters passed on.
#include <algorithm>

#include "config/sections.h"

namespace deepshard::config::detail {

namespace {

// DeepSpeed's own optimizers, matched case-insensitively and stored with this spelling.
const std::vector<std::string> kDeepSpeedOptimizers = {
    "Adam",       "AdamW", "Adagrad", "Lamb",   "OneBitAdam", "ZeroOneAdam",
    "OneBitLamb", "Lion",  "Muon",    "MuAdam", "MuAdamW",    "MuSGD"};
// Anything else is looked up in torch.optim (case-sensitive).
const std::vector<std::string> kTorchOptimizers = {"SGD",   "Adadelta",  "Adamax", "ASGD",
                                                   "LBFGS", "NAdam",     "RAdam",  "RMSprop",
                                                   "Rprop", "SparseAdam"};
const std::vector<std::string> kDeepSpeedSchedulers = {"WarmupLR", "WarmupDecayLR",
                                                       "WarmupCosineLR", "OneCycle", "LRRangeTest"};
const std::vector<std::string> kTorchSchedulers = {"LambdaLR",
                                                   "MultiplicativeLR",
                                                   "StepLR",
                                                   "MultiStepLR",
                                                   "ConstantLR",
                                                   "LinearLR",
                                                   "ExponentialLR",
                                                   "SequentialLR",
                                                   "CosineAnnealingLR",
                                                   "ChainedScheduler",
                                                   "ReduceLROnPlateau",
                                                   "CyclicLR",
                                                   "CosineAnnealingWarmRestarts",
                                                   "OneCycleLR",
                                                   "PolynomialLR"};

// Reports `name` as an unknown `kind` with the closest known name.
void report_unknown(Section& s, const char* kind, const std::string& name,
                    const std::vector<std::string>& ours, const std::vector<std::string>& torch) {
  std::vector<std::string> all = ours;
  all.insert(all.end(), torch.begin(), torch.end());
  s.diag().error(s.path_of("type"),
                 std::string("unknown ") + kind + " \"" + name + "\"" + did_you_mean(name, all));
}

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

bool is_adam(const std::string& type) { return type == "Adam" || type == "AdamW"; }

// The canonical optimizer name, or "" (and an error) for a name neither DeepSpeed nor torch has.
std::string canonical_optimizer(const std::string& type, Section& s) {
  for (const auto& name : kDeepSpeedOptimizers) {
    if (to_lower(name) == to_lower(type)) return name;
  }
  if (contains(kTorchOptimizers, type)) return type;
  report_unknown(s, "optimizer", type, kDeepSpeedOptimizers, kTorchOptimizers);
  return "";
}

// Adam/AdamW: every parameter; other optimizers: lr and weight_decay (their other parameters
// are passed on unchecked, as DeepSpeed passes them to the optimizer's constructor).
template <typename S, typename C>
void visit_optimizer_params(S& s, C& o, const AutoValues& av, bool adam) {
  s.field("lr", o.lr, Check::at_least(0.0), av.lr);
  s.field("weight_decay", o.weight_decay, Check::at_least(0.0), av.weight_decay);
  if (!adam) return;
  s.field("betas", o.betas, Check(), av.betas);
  s.field("eps", o.eps, Check::at_least(0.0), av.eps);
  s.field("adam_w_mode", o.adam_w_mode);
  s.field("torch_adam", o.torch_adam);
  s.field("bias_correction", o.bias_correction);
  s.field("amsgrad", o.amsgrad);
}

template <typename S, typename C>
void visit_scheduler_params(S& s, C& c, const AutoValues& av) {
  const Check kNonNegative = Check::at_least(0.0);
  const std::string& type = c.type;
  if (type == "WarmupLR" || type == "WarmupDecayLR") {
    s.field("warmup_min_lr", c.warmup_min_lr, kNonNegative, av.warmup_min_lr);
    s.field("warmup_max_lr", c.warmup_max_lr, kNonNegative, av.warmup_max_lr);
    s.field("warmup_num_steps", c.warmup_num_steps, kNonNegative, av.warmup_num_steps);
    s.field("warmup_type", c.warmup_type, Check::one_of({"log", "linear"}));
    if (type == "WarmupDecayLR") {
      s.field("total_num_steps", c.total_num_steps, kNonNegative, av.total_num_steps);
    }
  } else if (type == "WarmupCosineLR") {
    s.field("total_num_steps", c.total_num_steps, kNonNegative, av.total_num_steps);
    s.field("warmup_min_ratio", c.warmup_min_ratio, kNonNegative);
    s.field("warmup_num_steps", c.warmup_num_steps, kNonNegative, av.warmup_num_steps);
    s.field("cos_min_ratio", c.cos_min_ratio, kNonNegative);
    s.field("warmup_type", c.warmup_type, Check::one_of({"log", "linear"}));
  } else if (type == "OneCycle") {
    s.field("cycle_min_lr", c.cycle_min_lr, kNonNegative);
    s.field("cycle_max_lr", c.cycle_max_lr, kNonNegative, av.warmup_max_lr);
    s.field("decay_lr_rate", c.decay_lr_rate, kNonNegative);
    s.field("cycle_first_step_size", c.cycle_first_step_size, Check::at_least(1));
    s.field("cycle_second_step_size", c.cycle_second_step_size, Check::at_least(1));
    s.field("cycle_first_stair_count", c.cycle_first_stair_count, kNonNegative);
    s.field("cycle_second_stair_count", c.cycle_second_stair_count, kNonNegative);
    s.field("decay_step_size", c.decay_step_size, kNonNegative);
    s.field("cycle_momentum", c.cycle_momentum);
    s.field("cycle_min_mom", c.cycle_min_mom, kNonNegative);
    s.field("cycle_max_mom", c.cycle_max_mom, kNonNegative);
    s.field("decay_mom_rate", c.decay_mom_rate, kNonNegative);
  } else if (type == "LRRangeTest") {
    s.field("lr_range_test_min_lr", c.lr_range_test_min_lr, kNonNegative);
    s.field("lr_range_test_step_size", c.lr_range_test_step_size, Check::at_least(1));
    s.field("lr_range_test_step_rate", c.lr_range_test_step_rate, kNonNegative);
    s.field("lr_range_test_staircase", c.lr_range_test_staircase);
  }
}

// Parameters a scheduler cannot do without (DeepSpeed's constructors have no default for them).
void require_scheduler_params(Section& params, const std::string& type) {
  std::vector<const char*> required;
  if (type == "WarmupDecayLR" || type == "WarmupCosineLR") required = {"total_num_steps"};
  if (type == "OneCycle") required = {"cycle_min_lr", "cycle_max_lr"};
  for (const char* key : required) {
    if (!params.has(key)) params.diag().error(params.path_of(key), "required for " + type);
  }
}

void parse_optimizer_section(Section& root, OptimizerConfig& o, const AutoValues& av) {
  if (!root.has("optimizer")) {
    // No optimizer in the config: AdamW from the run's train values, as Hugging Face's Trainer
    // builds its own optimizer from its arguments when the config has none.
    root.declare("optimizer");
    o.type = "AdamW";
    if (av.lr.value) o.lr = *av.lr.value;
    if (av.weight_decay.value) o.weight_decay = *av.weight_decay.value;
    return;
  }
  Section s = root.child("optimizer");
  std::string type = o.type;
  s.field("type", type);
  o.type = canonical_optimizer(type, s);
  s.field("legacy_fusion", o.legacy_fusion);
  Section params = s.child("params");
  if (!is_adam(o.type)) params.allow_unknown_keys();
  visit_optimizer_params(params, o, av, is_adam(o.type));
  params.declare("max_grad_norm");
  if (params.has("max_grad_norm")) {
    params.diag().error(params.path_of("max_grad_norm"),
                        "not supported as an optimizer parameter; use the top-level "
                        "gradient_clipping");
  }
  params.finish();
  s.finish();
}

void parse_scheduler_section(Section& root, SchedulerConfig& c, const AutoValues& av) {
  Section s = root.child("scheduler");
  s.field("type", c.type);
  Section params = s.child("params");
  const bool ours = contains(kDeepSpeedSchedulers, c.type);
  if (!c.type.empty() && !ours && !contains(kTorchSchedulers, c.type)) {
    report_unknown(s, "scheduler", c.type, kDeepSpeedSchedulers, kTorchSchedulers);
  }
  if (ours) {
    visit_scheduler_params(params, c, av);
    require_scheduler_params(params, c.type);
  } else {
    params.allow_unknown_keys();
  }
  params.finish();
  s.finish();
}

}  // namespace

void parse_optimizer(Section& root, DsConfig& config, const AutoValues& av) {
  parse_optimizer_section(root, config.optimizer, av);
  parse_scheduler_section(root, config.scheduler, av);
}

void write_optimizer(Writer& root, const DsConfig& config) {
  Writer optimizer = root.child("optimizer");
  optimizer.field("type", config.optimizer.type);
  optimizer.field("legacy_fusion", config.optimizer.legacy_fusion);
  Writer params = optimizer.child("params");
  visit_optimizer_params(params, config.optimizer, AutoValues{}, true);
  if (config.scheduler.type.empty()) {
    root.field("scheduler", nullptr);
    return;
  }
  Writer scheduler = root.child("scheduler");
  scheduler.field("type", config.scheduler.type);
  Writer scheduler_params = scheduler.child("params");
  visit_scheduler_params(scheduler_params, config.scheduler, AutoValues{});
}

}  // namespace deepshard::config::detail
