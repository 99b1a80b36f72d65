// The pipeline and tensor_parallel sections (deepshard/config/parallel_config.h), strict: a key
// deepshard does not implement is an unknown key, never silently ignored; DeepSpeed's pipeline
// keys are read as DeepSpeed reads them, and warn where deepshard cannot do what they ask.
#include "config/parallel_section.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <regex>

namespace deepshard::config {
namespace detail {
namespace {

// A present, non-empty section without "enabled" is enabled (as for the sections recognised by
// name only, feature_sections.cpp), so {"size": 2} never silently means one tensor rank.
bool present(const Section& root, const char* key) {
  const nlohmann::json* v = root.get(key);
  return v != nullptr && v->is_object() && !v->empty();
}

// pipeline.partition (or its deprecated name partition_method), read as DeepSpeed reads it.
void read_partition(Section& pipeline, PipelineConfig& p) {
  std::string text = p.partition;
  pipeline.field_alias("partition", "partition_method", text);
  if (pipeline.has("partition_method")) {
    pipeline.diag().warn(pipeline.path_of("partition_method"),
                         "deprecated name of pipeline.partition (DeepSpeed's key); read as it");
  }
  const std::string key = pipeline.has("partition_method") ? "partition_method" : "partition";
  const std::string problem = read_partition_method(text, p.partition);
  if (!problem.empty()) pipeline.diag().error(pipeline.path_of(key), problem);
}

// What the keys DeepSpeed's PipelineEngine reads do here: the ones deepshard cannot do as
// DeepSpeed does warn, naming themselves (docs/parallel.md, "Config").
void warn_pipeline_keys(Section& pipeline, const PipelineConfig& p, int64_t tensor) {
  Diagnostics& diag = pipeline.diag();
  const bool on = p.effective_stages() > 1;
  if (p.seed_layers) {
    diag.warn(pipeline.path_of("seed_layers"),
              "true has no effect: every rank builds the whole model from train.seed, so each "
              "layer's initial values are the single-rank run's whatever the partition (what "
              "DeepSpeed's per-layer seeds keep stable), and each stage keeps one random stream");
  }
  if (p.activation_checkpoint_interval > 0 && !on) {
    diag.warn(pipeline.path_of("activation_checkpoint_interval"),
              "has no effect without a pipeline (pipeline.stages " + std::to_string(p.stages) +
                  "); use train.activation_checkpointing");
  } else if (p.activation_checkpoint_interval > 1) {
    diag.warn(pipeline.path_of("activation_checkpoint_interval"),
              std::to_string(p.activation_checkpoint_interval) +
                  ": each block is recomputed on its own, as with interval 1 (deepshard's "
                  "checkpointed regions are single blocks): the same gradients, one kept input "
                  "per block instead of one per " +
                  std::to_string(p.activation_checkpoint_interval) + " layers");
  }
  if (on && tensor > 1) {
    for (const char* key : {"pipe_partitioned", "grad_partitioned"}) {
      const nlohmann::json* v = pipeline.get(key);
      if (v == nullptr || !v->is_boolean() || !v->get<bool>()) continue;
      diag.warn(pipeline.path_of(key),
                std::string("true has no effect: each tensor rank of a stage sends the whole ") +
                    (key[0] == 'p' ? "activation to the next stage"
                                   : "activation gradient to the previous stage") +
                    " (the same values; DeepSpeed sends 1/" + std::to_string(tensor) +
                    " of it and all-gathers it over the tensor group)");
    }
  }
}

ParallelConfig read(Section& root) {
  ParallelConfig p;
  p.tensor_parallel.enabled = present(root, "tensor_parallel");
  Section tensor = root.child("tensor_parallel");
  tensor.field("enabled", p.tensor_parallel.enabled);
  tensor.field("size", p.tensor_parallel.size, Check::at_least(1));
  tensor.finish();
  Section pipeline = root.child("pipeline");
  PipelineConfig& pipe = p.pipeline;
  pipeline.field("stages", pipe.stages, Check::at_least(1));
  pipe.enabled = pipe.stages > 1;  // DeepSpeed has no "enabled": a pipeline is stages > 1
  pipeline.field("enabled", pipe.enabled);
  read_partition(pipeline, pipe);
  pipeline.field("seed_layers", pipe.seed_layers);
  pipeline.field("activation_checkpoint_interval", pipe.activation_checkpoint_interval,
                 Check::at_least(0));
  pipeline.field("pipe_partitioned", pipe.pipe_partitioned);
  pipeline.field("grad_partitioned", pipe.grad_partitioned);
  pipeline.finish();
  warn_pipeline_keys(pipeline, pipe, p.tensor_parallel.effective_size());
  return p;
}

}  // namespace

ParallelConfig parse_parallel(Section& root, DsConfig& config) {
  ParallelConfig p = read(root);
  const int64_t stages = p.pipeline.effective_stages();
  if (stages > 1) {
    // A pipeline trains every architecture (fp32, bf16, fp16) at every ZeRO stage, the stage's
    // sharding over its data-parallel group (docs/parallel.md).
    const std::string with = " with pipeline.stages=" + std::to_string(stages) + " (";
    if (config.compression.enabled())
      config.other_features.push_back("compression" + with + "PowerSGD is not tested with it)");
    if (config.flops_profiler.enabled) {
      config.other_features.push_back("flops_profiler" + with +
                                      "the profiler measures rank 0's whole-model forward)");
    }
  }
  const int64_t tensor = p.tensor_parallel.effective_size();
  if (tensor > 1) {
    // Tensor parallelism trains with every ZeRO stage, in fp32, bf16 and fp16 (docs/parallel.md);
    // the rest is refused naming the key it meets.
    const std::string with = "tensor_parallel.size=" + std::to_string(tensor) + " with ";
    if (config.compression.enabled()) {
      config.other_features.push_back(with +
                                      "compression (PowerSGD is not tested with tensor "
                                      "parallelism)");
    }
  }
  return p;
}

}  // namespace detail

std::string read_partition_method(const std::string& text, std::string& normalized) {
  std::string method = text;
  std::transform(method.begin(), method.end(), method.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (method == "uniform" || method == "parameters") {
    normalized = method;
    return "";
  }
  if (method.rfind("type:", 0) == 0) {
    const std::string rest = method.substr(5);
    const std::string regex = rest.substr(0, rest.find(':'));
    try {
      std::regex(regex, std::regex::ECMAScript | std::regex::icase);
    } catch (const std::regex_error& e) {
      return "\"type:" + regex + "\" is not a valid regular expression (" + e.what() + ")";
    }
    normalized = "type:" + regex;
    return "";
  }
  return "\"" + text +
         "\" is not a partition method (use \"parameters\", \"uniform\" or \"type:<regex>\"; "
         "DeepSpeed does not implement \"profile\" either)";
}

ParallelConfig parse_parallel_config(const nlohmann::json& json, const std::string& origin) {
  detail::Diagnostics diag(origin, nullptr);
  detail::Section root(json.is_object() ? &json : nullptr, "", diag);
  ParallelConfig p = detail::read(root);
  diag.throw_if_errors();
  return p;
}

}  // namespace deepshard::config
