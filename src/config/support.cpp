// What the engine does not implement: the table of refusals (a config that asks for one of these
// features is refused at start, naming the key) and the sections recognised only by name. What
// every other key does is key_status.cpp's table; tests/config/key_status_test.cpp and
// deepspeed_keys_test.cpp keep the two in agreement.
#include <algorithm>
#include <optional>
#include <string>

#include "config/reader.h"
#include "deepshard/config/loader.h"
#include "deepshard/util/error.h"

namespace deepshard::config {

namespace {

// The value to show when the config asks for the feature ("" = the key alone), else nullopt.
using Requested = std::optional<std::string> (*)(const DsConfig&);

std::optional<std::string> flag(bool on) {
  return on ? std::optional<std::string>("") : std::nullopt;
}

std::optional<std::string> show_if(bool on, const std::string& value) {
  return on ? std::optional<std::string>(value) : std::nullopt;
}

std::optional<std::string> non_fp32(const std::optional<DType>& dtype) {
  return show_if(dtype && *dtype != DType::kFp32, dtype ? to_string(*dtype) : "");
}

bool is_supported_scheduler(const std::string& type) {
  return type.empty() || type == "WarmupLR" || type == "WarmupDecayLR" ||
         type == "WarmupCosineLR" || type == "OneCycle" || type == "LRRangeTest";
}

struct Row {
  const char* key;
  Requested requested;
};

// clang-format off
const Row kUnsupported[] = {
    // precision (fp16 and bf16 train with fp32 master weights and fp32 gradient accumulation)
    {"fp16.auto_cast", [](const DsConfig& c) { return flag(c.fp16.enabled && c.fp16.auto_cast); }},
    {"fp16.fp16_master_weights_and_grads", [](const DsConfig& c) { return flag(c.fp16.enabled && c.fp16.fp16_master_weights_and_grads); }},
    {"bf16.bf16_master_weights_and_grads", [](const DsConfig& c) { return flag(c.bf16.enabled && c.bf16.bf16_master_weights_and_grads); }},
    {"bf16.bf16_optimizer_states", [](const DsConfig& c) { return flag(c.bf16.enabled && c.bf16.bf16_optimizer_states); }},
    {"torch_autocast.enabled", [](const DsConfig& c) { return flag(c.torch_autocast.enabled); }},
    {"data_types.grad_accum_dtype", [](const DsConfig& c) { return non_fp32(c.data_types.grad_accum_dtype); }},
    {"data_types.param_dtype", [](const DsConfig& c) { return non_fp32(c.data_types.param_dtype); }},
    {"data_types.buffer_dtype", [](const DsConfig& c) { return non_fp32(c.data_types.buffer_dtype); }},
    // gradient reduction variants
    {"gradient_allreduce_op", [](const DsConfig& c) { return show_if(c.gradient_allreduce_op != "mean", c.gradient_allreduce_op); }},
    {"sparse_gradients", [](const DsConfig& c) { return flag(c.sparse_gradients); }},
    {"managed_gradient_accumulation", [](const DsConfig& c) { return show_if(!c.managed_gradient_accumulation, "false"); }},
    {"sequence_parallel_size", [](const DsConfig& c) { return show_if(c.sequence_parallel_size != 1, std::to_string(c.sequence_parallel_size)); }},
    // optimizer and schedule
    {"optimizer.type", [](const DsConfig& c) { return show_if(c.optimizer.type != "Adam" && c.optimizer.type != "AdamW", c.optimizer.type); }},
    {"optimizer.params.amsgrad", [](const DsConfig& c) { return flag(c.optimizer.amsgrad); }},
    {"scheduler.type", [](const DsConfig& c) { return show_if(!is_supported_scheduler(c.scheduler.type), c.scheduler.type); }},
    // monitoring and profiling
    // (tensorboard, csv_monitor, comms_logger and flops_profiler are implemented; the hosted
    // trackers need a network service deepshard does not talk to)
    {"wandb.enabled", [](const DsConfig& c) { return show_if(c.monitor.wandb.enabled, "true (Weights & Biases is a network service; use tensorboard or csv_monitor)"); }},
    {"comet.enabled", [](const DsConfig& c) { return show_if(c.monitor.comet.enabled, "true (Comet is a network service; use tensorboard or csv_monitor)"); }},
    {"trackio.enabled", [](const DsConfig& c) { return show_if(c.monitor.trackio.enabled, "true (trackio is a network service; use tensorboard or csv_monitor)"); }},
    {"comms_logger.debug", [](const DsConfig& c) { return show_if(c.comms_logger.enabled && c.comms_logger.debug, "true (caller function names)"); }},
    {"flops_profiler.recompute_fwd_factor", [](const DsConfig& c) { return show_if(c.flops_profiler.enabled && c.flops_profiler.recompute_fwd_factor != 0.0, detail::format_value(c.flops_profiler.recompute_fwd_factor)); }},
    // checkpoints
    {"checkpoint.load_universal", [](const DsConfig& c) { return flag(c.checkpoint.load_universal); }},
};
// clang-format on

}  // namespace

std::vector<std::string> unsupported_features(const DsConfig& config) {
  std::vector<std::string> out;
  for (const Row& row : kUnsupported) {
    std::optional<std::string> value = row.requested(config);
    if (!value) continue;
    out.push_back(std::string("not supported yet: ") + row.key +
                  (value->empty() ? "" : "=" + *value));
  }
  // Sections recognised only by name (amp, elasticity, pipeline, zenflow, ...): none is supported.
  for (const std::string& key : config.other_features) {
    out.push_back("not supported yet: " + key);
  }
  return out;
}

void check_supported(const DsConfig& config) {
  std::string message;
  for (const auto& u : unsupported_features(config)) message += (message.empty() ? "" : "\n") + u;
  if (!message.empty()) throw ConfigError(message);
}

}  // namespace deepshard::config
