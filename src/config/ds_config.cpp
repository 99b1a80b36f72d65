// parse_ds_config and to_json: the top-level DeepSpeed keys, then each section (sections.h), the
// batch triple and DeepSpeed's cross-checks; every problem of the file is reported together.
#include <nlohmann/json.hpp>

#include "config/key_status.h"
#include "config/parallel_section.h"
#include "config/sections.h"
#include "deepshard/config/loader.h"
#include "deepshard/util/error.h"
#include "util/log.h"

namespace deepshard::config {

const char* to_string(OffloadDevice d) {
  switch (d) {
    case OffloadDevice::kNone:
      return "none";
    case OffloadDevice::kCpu:
      return "cpu";
    case OffloadDevice::kNvme:
      return "nvme";
  }
  return "?";
}

const char* to_string(DType d) {
  switch (d) {
    case DType::kFp32:
      return "fp32";
    case DType::kFp16:
      return "fp16";
    case DType::kBf16:
      return "bf16";
  }
  return "?";
}

namespace detail {

namespace {

// A run file's own sections: not DeepSpeed keys, parsed by parse_run_config.
const std::vector<std::string> kRunSections = {"model", "data", "task", "train", "comm"};

template <typename S, typename C>
void visit_top_level(S& s, C& c, const AutoValues& av) {
  s.field("gradient_clipping", c.gradient_clipping, Check::at_least(0.0), av.gradient_clipping);
  s.field("steps_per_print", c.steps_per_print, Check::at_least(1));
  s.field("wall_clock_breakdown", c.wall_clock_breakdown);
  s.field("prescale_gradients", c.prescale_gradients);
  s.field("gradient_predivide_factor", c.gradient_predivide_factor, Check::above(0.0));
  s.field("communication_data_type", c.communication_data_type);
  s.field("gradient_allreduce_op", c.gradient_allreduce_op, Check::one_of({"mean", "sum"}));
  s.field("sparse_gradients", c.sparse_gradients);
  s.field("managed_gradient_accumulation", c.managed_gradient_accumulation);
  s.field("memory_breakdown", c.memory_breakdown);
  s.field("dump_state", c.dump_state);
  s.field("dataloader_drop_last", c.dataloader_drop_last);
  s.field("zero_allow_untested_optimizer", c.zero_allow_untested_optimizer);
  s.field("zero_force_ds_cpu_optimizer", c.zero_force_ds_cpu_optimizer);
  s.field("sequence_parallel_size", c.sequence_parallel_size, Check::at_least(1));
  s.field("seq_parallel_communication_data_type", c.seq_parallel_communication_data_type);
  s.field("vocabulary_size", c.vocabulary_size, Check::at_least(0));
  s.field("disable_allgather", c.disable_allgather);
  s.field("graph_harvesting", c.graph_harvesting);
  s.field("use_data_before_expert_parallelism", c.use_data_before_expert_parallelism);
  s.field("log_level", c.log_level,
          Check::one_of({"debug", "info", "warning", "error", "critical"}));
  auto timers = s.child("timers");
  auto throughput = timers.child("throughput");
  throughput.field("enabled", c.timers.throughput_enabled);
  throughput.field("synchronized", c.timers.throughput_synchronized);
  throughput.finish();
  timers.finish();
}

// The batch keys as given. The run's micro batch size and accumulation steps also fill their keys
// when absent (as Accelerate does), so a DeepSpeed config without batch keys runs from them.
BatchInputs read_batch(Section& root, const AutoValues& av) {
  BatchInputs in;
  root.field("train_batch_size", in.train_batch_size, {}, av.train_batch_size);
  root.field("train_micro_batch_size_per_gpu", in.micro_batch_size, {}, av.micro_batch_size);
  root.field("gradient_accumulation_steps", in.gradient_accumulation_steps, {},
             av.gradient_accumulation_steps);
  if (!root.has("train_micro_batch_size_per_gpu")) in.micro_batch_size = av.micro_batch_size.value;
  if (!root.has("gradient_accumulation_steps")) {
    in.gradient_accumulation_steps = av.gradient_accumulation_steps.value;
  }
  in.any_auto = (root.is_auto("train_batch_size") && !in.train_batch_size) ||
                (root.is_auto("train_micro_batch_size_per_gpu") && !in.micro_batch_size) ||
                (root.is_auto("gradient_accumulation_steps") && !in.gradient_accumulation_steps);
  return in;
}

// train.precision asks for a model dtype; the DeepSpeed keys must give the same one.
void check_precision_request(const ResolveContext& context, const DsConfig& config,
                             Diagnostics& diag) {
  if (!context.train.precision) return;
  const std::string& wanted = *context.train.precision;
  std::string got = to_string(config.model_dtype());
  if (wanted == got) return;
  diag.error("train.precision", "\"" + wanted + "\" but the DeepSpeed keys select " + got +
                                    " (fp16.enabled / bf16.enabled); write \"auto\" there or "
                                    "make them agree");
}

}  // namespace

DsConfig parse_ds_config(const nlohmann::json& json, const ResolveContext& context,
                         Diagnostics& diag, bool run_file) {
  DS_CHECK(context.dp_world_size >= 1, UsageError, "data-parallel world size must be >= 1, got ",
           context.dp_world_size);
  DsConfig config;
  if (!json.is_object()) {
    diag.error("", "expected a JSON object, found " + describe(json));
    return config;
  }
  Section root(&json, "", diag);
  const AutoValues av = make_auto_values(context);
  const size_t errors_before = diag.error_count();
  const BatchInputs batch = read_batch(root, av);
  const bool batch_readable = diag.error_count() == errors_before;
  visit_top_level(root, config, av);
  parse_zero(root, config, av);
  parse_precision(root, config, av);
  parse_optimizer(root, config, av);
  parse_features(root, config);
  const ParallelConfig parallel = parse_parallel(root, config);
  root.finish(/*warn_only=*/true, run_file ? kRunSections : std::vector<std::string>{});

  // The batch triple counts data-parallel replicas: the job's ranks (context.dp_world_size)
  // divided by the ranks one replica spans (pipeline stages x tensor size), as DeepSpeed's
  // dp_world_size; the sections' sizes > 1 are refused as not supported yet (parallel_section.h).
  const int64_t model_ranks = parallel.model_ranks();
  if (context.dp_world_size % model_ranks != 0) {
    diag.error(
        parallel.pipeline.effective_stages() > 1 ? "pipeline.stages" : "tensor_parallel.size",
        "the job's " + std::to_string(context.dp_world_size) +
            " ranks are not divisible by pipeline stages (" +
            std::to_string(parallel.pipeline.effective_stages()) + ") x tensor size (" +
            std::to_string(parallel.tensor_parallel.effective_size()) + ")");
  } else if (batch_readable) {
    resolve_batch(batch, context.dp_world_size / model_ranks, config, diag);
  }
  check_precision_request(context, config, diag);
  check_consistency(config, diag);
  check_mics(config, context.dp_world_size, model_ranks, diag);
  if (diag.error_count() == 0) {
    for (const auto& [path, message] : ignored_key_warnings(config)) diag.warn(path, message);
  }
  return config;
}

}  // namespace detail

DsConfig parse_ds_config(const nlohmann::json& json, const ResolveContext& context,
                         std::vector<std::string>* warnings, bool run_file) {
  detail::Diagnostics diag(context.origin, warnings);
  DsConfig config = detail::parse_ds_config(json, context, diag, run_file);
  diag.throw_if_errors();
  return config;
}

DsConfig load_ds_config(const std::string& path, int64_t dp_world_size) {
  ResolveContext context;
  context.dp_world_size = dp_world_size;
  context.origin = path;
  std::vector<std::string> warnings;
  DsConfig config = parse_ds_config(read_json_file(path), context, &warnings);
  for (const auto& w : warnings) log::warn(w);
  return config;
}

nlohmann::json to_json(const DsConfig& config) {
  nlohmann::json out = nlohmann::json::object();
  detail::Writer w(out);
  w.field("train_batch_size", config.train_batch_size);
  w.field("train_micro_batch_size_per_gpu", config.train_micro_batch_size_per_gpu);
  w.field("gradient_accumulation_steps", config.gradient_accumulation_steps);
  detail::visit_top_level(w, config, detail::AutoValues{});
  detail::write_zero(w, config.zero);
  detail::write_precision(w, config);
  detail::write_optimizer(w, config);
  detail::write_features(w, config);
  return out;
}

}  // namespace deepshard::config
