// The last step of a training run: peak memory of every rank, the trained weights
// (train.save_weights), a text sample (train.sample_tokens) and summary.json (rank 0).
#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include "data/tokenizer.h"
#include "deepshard/train/model_factory.h"
#include "monitor/jsonl_writer.h"
#include "monitor/process_memory.h"
#include "train/memory_report.h"
#include "train/save_weights.h"
#include "train/training_run.h"
#include "util/log.h"

namespace deepshard::train {
namespace {

// With a pipeline, the writer's pipeline group (data and tensor rank 0) gathers the stages.
PipelineWeights pipeline_weights(const TrainingRun& run) {
  PipelineWeights pipeline;
  if (run.pipeline) {
    pipeline.stages = run.axes->pipeline.get();
    pipeline.sends = run.axes->coord.data == 0 && run.axes->coord.tensor == 0;
  }
  return pipeline;
}

// At stage 3 every rank runs the sampling forward: it gathers parameters collectively. With
// tensor or pipeline parallelism the whole parameters are gathered (as train.save_weights gathers
// them) into a whole model of the run's dtype on rank 0, which samples alone.
void sample_text(TrainingRun& run) {
  const auto& train = run.config.train;
  if (train.sample_tokens <= 0 || run.summary.stopped) return;
  if (!run.model->generates_text()) {
    if (run.rank0)
      log::warn("train.sample_tokens: model.arch \"", run.model->arch(),
                "\" does not generate text; no sample is written");
    return;
  }
  std::shared_ptr<models::CausalLmImpl> model = run.model;
  if (run.tensor_parallel || run.pipeline) {
    const auto whole = gather_whole_parameters(*run.engine, *run.model, run.tensor_parallel.get(),
                                               pipeline_weights(run));
    if (!run.rank0) return;
    model = make_model(run.config.model, train.seed);
    model->to(whole.begin()->second.scalar_type());
    torch::NoGradGuard no_grad;
    for (auto& item : model->named_parameters()) item.value().copy_(whole.at(item.key()));
  } else if (!run.rank0 && run.ds.zero.stage != 3) {
    return;
  }
  const auto tokenizer = data::tokenizer_for_vocab(run.config.model.vocab_size);
  auto prompt16 = tokenizer->encode(train.sample_prompt);
  std::vector<int64_t> prompt(prompt16.begin(), prompt16.end());
  auto tokens = model->generate(prompt, train.sample_tokens, train.sample_temperature,
                                train.sample_top_k, train.seed);
  run.summary.sample = train.sample_prompt + tokenizer->decode(tokens);
}

nlohmann::json summary_json(const TrainingRun& run) {
  const TrainSummary& summary = run.summary;
  const auto& ledger = run.engine->ledger();
  nlohmann::json memory = nlohmann::json::object(), peak = nlohmann::json::object();
  for (int c = 0; c < static_cast<int>(zero::MemoryCategory::kCount); ++c) {
    auto category = static_cast<zero::MemoryCategory>(c);
    memory[zero::to_string(category)] = ledger.bytes(category);
    peak[zero::to_string(category)] = ledger.peak_bytes(category);
  }
  memory["model_states"] = ledger.model_state_bytes();
  nlohmann::json out = {
      {"steps", summary.steps},
      {"final_loss", summary.final_loss},
      {"mean_tokens_per_s", summary.mean_tokens_per_s},
      {"mean_samples_per_s", summary.mean_tokens_per_s / double(run.config.model.block_size)},
      {"comm_wait_share", summary.comm_wait_share},
      {"world_size", run.group.size()},
      {"num_parameters", run.engine->num_parameters()},
      {"peak_rss_bytes", summary.peak_rss_bytes},
      {"ledger_bytes_rank0", memory},
      {"ledger_peak_bytes_rank0", peak},
      {"comm", comm_ops_json(run.group.log())},
      {"config", nlohmann::json::parse(run.config.resolved_json)}};
  out["memory_report"] = memory_report_json(ledger, run.memory_estimate);
  out["comm_estimate_per_step"] =
      comm_estimate_json(zero::estimate_comm_per_step(run.estimate_in), run.group.size());
  if (summary.final_val_loss >= 0) out["final_val_loss"] = summary.final_val_loss;
  if (summary.final_val_accuracy >= 0) {
    out["final_val_accuracy"] = summary.final_val_accuracy;
    out["majority_baseline"] = summary.majority_baseline;
  }
  out["task"] = run.config.task.type;
  if (!summary.sample.empty()) out["sample"] = summary.sample;
  return out;
}

}  // namespace

void finish_run(TrainingRun& run, const std::vector<std::unique_ptr<StepHook>>& hooks) {
  run.summary.peak_rss_bytes = gather_over_ranks(run.group, monitor::peak_rss_bytes());
  if (run.config.train.save_weights) {
    save_model_weights(*run.engine, *run.model, run.config.model.arch,
                       run.config.train.run_dir + "/model.safetensors", run.rank0,
                       run.tensor_parallel.get(), pipeline_weights(run));
  }
  sample_text(run);
  if (!run.rank0) return;
  nlohmann::json out = summary_json(run);
  for (const auto& hook : hooks) hook->add_to_summary(run, out);
  monitor::write_json_file(run.config.train.run_dir + "/summary.json", out);
}

}  // namespace deepshard::train
