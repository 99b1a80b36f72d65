// Run files: deepshard's own sections (model, data, task, train, comm) with the same strictness as
// the DeepSpeed keys, model presets (of the architectures' schemas the caller passes: config knows
// no architecture), and the resolved JSON of the whole run. The train section's values fill the
// DeepSpeed "auto" entries (auto_values.cpp).
#include <algorithm>
#include <nlohmann/json.hpp>

#include "config/parallel_section.h"
#include "config/sections.h"
#include "deepshard/config/loader.h"
#include "deepshard/util/error.h"

namespace deepshard::config {

namespace {

const ArchSchema* find_schema(const ArchSchemas& archs, const std::string& arch) {
  for (const ArchSchema& a : archs) {
    if (a.name == arch) return &a;
  }
  return nullptr;
}

const ModelPreset* find_preset(const ArchSchemas& archs, const std::string& arch,
                               const std::string& name) {
  const ArchSchema* schema = find_schema(archs, arch);
  if (schema == nullptr) return nullptr;
  for (const ModelPreset& p : schema->presets) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

std::vector<std::string> arch_names(const ArchSchemas& archs) {
  std::vector<std::string> names;
  for (const ArchSchema& a : archs) names.push_back(a.name);
  return names;
}

// The presets of `arch`, or of every architecture when it is "" (each name once).
std::vector<std::string> preset_names(const ArchSchemas& archs, const std::string& arch = "") {
  std::vector<std::string> names;
  for (const ArchSchema& a : archs) {
    if (!arch.empty() && a.name != arch) continue;
    for (const ModelPreset& p : a.presets) {
      if (std::find(names.begin(), names.end(), p.name) == names.end()) names.push_back(p.name);
    }
  }
  return names;
}

// An empty model.arch is the first architecture's.
void resolve_arch(ModelConfig& m, const ArchSchemas& archs) {
  DS_ASSERT(!archs.empty(), "no architecture to parse a model section with");
  if (m.arch.empty()) m.arch = archs.front().name;
}

template <typename S, typename C>
void visit_model(S& s, C& m, const ArchSchemas& archs) {
  const detail::Check kPositive = detail::Check::at_least(1);
  s.field("arch", m.arch, detail::Check::one_of(arch_names(archs)));
  s.field("preset", m.preset, detail::Check::one_of(preset_names(archs)));
  s.field("n_layer", m.n_layer, kPositive);
  s.field("n_head", m.n_head, kPositive);
  s.field("n_embd", m.n_embd, kPositive);
  s.field("block_size", m.block_size, kPositive);
  s.field("n_kv_head", m.n_kv_head, detail::Check::at_least(0));  // 0: the preset's
  s.field("intermediate_size", m.intermediate_size, detail::Check::at_least(0));
  s.field("rope_theta", m.rope_theta, detail::Check::above(0.0));
  s.field("rms_norm_eps", m.rms_norm_eps, detail::Check::above(0.0));
  s.field("tie_word_embeddings", m.tie_word_embeddings);
  s.field("vocab_size", m.vocab_size, kPositive);
  s.field("dropout", m.dropout, detail::Check::between(0.0, 1.0));
  s.field("bias", m.bias);
  s.field("fused_kernels", m.fused_kernels);
  s.field("init_from", m.init_from);
  s.field("pooling", m.pooling, detail::Check::one_of({"first", "mean"}));
}

template <typename S, typename C>
void visit_data(S& s, C& d) {
  s.field("train", d.train);
  s.field("valid", d.valid);
}

template <typename S, typename C>
void visit_task(S& s, C& t) {
  s.field("type", t.type, detail::Check::one_of({"pretraining", "classification"}));
  s.field("train_labels", t.train_labels);
  s.field("valid_labels", t.valid_labels);
}

template <typename S, typename C>
void visit_train(S& s, C& t) {
  const detail::Check kNonNegative = detail::Check::at_least(0);
  const detail::Check kPositive = detail::Check::at_least(1);
  s.field("steps", t.steps, kPositive);
  s.field("seed", t.seed);
  s.field("run_dir", t.run_dir);
  s.field("log_interval", t.log_interval, kPositive);
  s.field("eval_interval", t.eval_interval, kNonNegative);
  s.field("eval_batches", t.eval_batches, kPositive);
  s.field("sample_tokens", t.sample_tokens, kNonNegative);
  s.field("sample_prompt", t.sample_prompt);
  s.field("sample_temperature", t.sample_temperature, detail::Check::above(0.0));
  s.field("sample_top_k", t.sample_top_k, kNonNegative);
  s.field("memory_report", t.memory_report);
  s.field("activation_checkpointing", t.activation_checkpointing);
  s.field("save_weights", t.save_weights);
  s.field("save_interval", t.save_interval, kNonNegative);
  s.field("checkpoint_dir", t.checkpoint_dir);
  // "auto" is this key's own value here (continue from the latest checkpoint), not DeepSpeed's
  // placeholder.
  s.field("resume", t.resume, detail::Check{}, detail::Auto<std::string>{std::string("auto")});
  s.field("micro_batch_size", t.micro_batch_size, kPositive);
  s.field("gradient_accumulation_steps", t.gradient_accumulation_steps, kPositive);
  s.field("lr", t.lr, kNonNegative);
  s.field("weight_decay", t.weight_decay, kNonNegative);
  s.field("warmup_steps", t.warmup_steps, kNonNegative);
  s.field("max_grad_norm", t.max_grad_norm, kNonNegative);
  s.field("precision", t.precision, detail::Check::one_of({"fp32", "bf16", "fp16"}));
}

template <typename S, typename C>
void visit_comm(S& s, C& c) {
  s.field("timeout_s", c.timeout_s, detail::Check::above(0.0));
  s.field("transport", c.transport, detail::Check::one_of({"auto", "gloo", "shm"}));
}

// Calls visit(section, value, visit_one) for the five run sections, readers or writers alike.
template <typename S, typename R, typename Visit>
void visit_run_sections(S& root, R& run, const ArchSchemas& archs, Visit&& visit) {
  visit(root.child("model"), run.model, [&](auto& s, auto& v) { visit_model(s, v, archs); });
  visit(root.child("data"), run.data, [](auto& s, auto& v) { visit_data(s, v); });
  visit(root.child("task"), run.task, [](auto& s, auto& v) { visit_task(s, v); });
  visit(root.child("train"), run.train, [](auto& s, auto& v) { visit_train(s, v); });
  visit(root.child("comm"), run.comm, [](auto& s, auto& v) { visit_comm(s, v); });
}

// Presets applied, then what the architecture needs of the sizes (its schema's check).
void check_model(ModelConfig& m, const ArchSchemas& archs, detail::Diagnostics& diag) {
  resolve_arch(m, archs);
  const ArchSchema* schema = find_schema(archs, m.arch);
  if (schema == nullptr) return;  // reported by the field check
  if (find_preset(archs, m.arch, m.preset) == nullptr) {
    const auto names = preset_names(archs);  // an unknown name is reported by the field check
    if (std::find(names.begin(), names.end(), m.preset) != names.end())
      diag.error("model.preset",
                 "no preset \"" + m.preset + "\" for model.arch \"" + m.arch + "\"");
    return;
  }
  apply_model_preset(m, archs);
  if (m.n_head > 0 && m.n_embd % m.n_head != 0) {
    diag.error("model.n_embd", std::to_string(m.n_embd) + " is not divisible by model.n_head = " +
                                   std::to_string(m.n_head));
  }
  std::vector<std::pair<std::string, std::string>> problems;
  schema->check(m, problems);
  for (const auto& [key, message] : problems) diag.error(key, message);
}

// Label files are errors for the pretraining task, which would not read them. (The trainer finds
// a classification task's defaults beside the token files.)
void check_task(const RunConfig& run, detail::Diagnostics& diag) {
  const TaskConfig& t = run.task;
  if (!t.classification()) {
    if (!t.train_labels.empty())
      diag.error("task.train_labels", "read only with task.type \"classification\"");
    if (!t.valid_labels.empty())
      diag.error("task.valid_labels", "read only with task.type \"classification\"");
    return;
  }
  if (!t.valid_labels.empty() && run.data.valid.empty())
    diag.error("task.valid_labels", "given without data.valid (the token file it labels)");
}

}  // namespace

void apply_model_preset(ModelConfig& model, const ArchSchemas& archs) {
  resolve_arch(model, archs);
  DS_CHECK(find_schema(archs, model.arch) != nullptr, ConfigError,
           "model.arch: unknown architecture \"", model.arch, "\"",
           detail::did_you_mean(model.arch, arch_names(archs)));
  const ModelPreset* preset = find_preset(archs, model.arch, model.preset);
  if (preset == nullptr) {
    std::string names;
    for (const std::string& n : preset_names(archs, model.arch))
      names += (names.empty() ? "" : ", ") + n;
    throw ConfigError("model.preset: unknown preset \"" + model.preset + "\" for model.arch \"" +
                      model.arch + "\"" +
                      detail::did_you_mean(model.preset, preset_names(archs, model.arch)) +
                      "; presets: " + names);
  }
  if (model.n_layer == 0) model.n_layer = preset->n_layer;
  if (model.n_head == 0) model.n_head = preset->n_head;
  if (model.n_embd == 0) model.n_embd = preset->n_embd;
  if (model.block_size == 0) model.block_size = preset->block_size;
  if (model.n_kv_head == 0) model.n_kv_head = preset->n_kv_head;
  if (model.intermediate_size == 0) model.intermediate_size = preset->intermediate_size;
}

void check_model_section(ModelConfig& model, const ArchSchemas& archs, const std::string& origin) {
  apply_model_preset(model, archs);  // ConfigError for an unknown architecture or preset
  detail::Diagnostics diag(origin, nullptr);
  check_model(model, archs, diag);
  diag.throw_if_errors();
}

RunConfig parse_run_config(const nlohmann::json& json, int64_t dp_world_size,
                           std::vector<std::string>* warnings, const std::string& origin,
                           const ArchSchemas& archs) {
  detail::Diagnostics diag(origin, warnings);
  RunConfig run;
  if (!json.is_object()) {
    diag.error("", "expected a JSON object, found " + detail::describe(json));
    diag.throw_if_errors();
  }
  detail::Section root(&json, "", diag);
  visit_run_sections(root, run, archs, [](detail::Section&& s, auto& value, auto&& visit_one) {
    visit_one(s, value);
    s.finish();
  });
  check_model(run.model, archs, diag);
  check_task(run, diag);

  ResolveContext context;
  context.dp_world_size = dp_world_size;
  context.hidden_size = run.model.n_embd;
  context.train = run.train;
  context.origin = origin;
  run.ds = detail::parse_ds_config(json, context, diag, /*run_file=*/true);
  diag.throw_if_errors();
  run.parallel = parse_parallel_config(json, origin);
  // The classifier runs on the whole model of a data-parallel replica.
  if (run.task.classification()) {
    DS_CHECK(
        run.parallel.pipeline.effective_stages() == 1, ConfigError, origin,
        ": task.type \"classification\" does not run with pipeline stages yet (pipeline.stages ",
        run.parallel.pipeline.effective_stages(), "); use data parallelism and ZeRO");
    DS_CHECK(run.parallel.tensor_parallel.effective_size() == 1, ConfigError, origin,
             ": task.type \"classification\" does not run with tensor_parallel.size ",
             run.parallel.tensor_parallel.effective_size(), " yet");
  }
  // DeepSpeed's PipelineEngine checkpoints every activation_checkpoint_interval layers of a stage;
  // deepshard's regions are single blocks (interval 1; a larger one warned in
  // parallel_section.cpp).
  if (run.parallel.pipeline.effective_stages() > 1 &&
      run.parallel.pipeline.activation_checkpoint_interval > 0)
    run.train.activation_checkpointing = true;
  // DeepSpeed's steps_per_print sets the progress interval unless train.log_interval is given.
  const bool log_interval_given =
      json.contains("train") && json["train"].is_object() && json["train"].contains("log_interval");
  if (run.ds.steps_per_print && !log_interval_given)
    run.train.log_interval = *run.ds.steps_per_print;

  nlohmann::json resolved = to_json(run.ds);
  // The rank grid's sections (validated above, kept out of DsConfig: parallel_config.h).
  for (const char* key : {"pipeline", "tensor_parallel"}) {
    if (json.contains(key)) resolved[key] = json[key];
  }
  detail::Writer writer(resolved);
  visit_run_sections(
      writer, run, archs,
      [](detail::Writer&& w, const auto& value, auto&& visit_one) { visit_one(w, value); });
  run.resolved_json = resolved.dump(2);
  return run;
}

}  // namespace deepshard::config
