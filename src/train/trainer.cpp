// Implementation of the training loop (trainer.h).
#include "deepshard/train/trainer.h"

#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "deepshard/checkpoint/engine_checkpoint.h"
#include "deepshard/checkpoint/hf_gpt2.h"
#include "deepshard/checkpoint/tag_directory.h"
#include "deepshard/data/sampler.h"
#include "deepshard/data/token_file.h"
#include "deepshard/data/tokenizer.h"
#include "deepshard/models/gpt.h"
#include "deepshard/monitor/jsonl_writer.h"
#include "deepshard/monitor/process_memory.h"
#include "deepshard/util/error.h"
#include "deepshard/util/log.h"
#include "deepshard/zero/engine.h"
#include "deepshard/zero/estimator.h"
#include "deepshard/zero/partitioned_build.h"
#include "train/activation_tracker.h"
#include "train/memory_profile.h"
#include "train/memory_report.h"
#include "train/run_monitors.h"
#include "train/save_weights.h"

namespace deepshard::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The signal that asked the run to stop (SIGTERM, as Slurm preempts), set by the handler: the one
// thing a signal handler may touch.
std::atomic<int> g_stop_signal{0};
extern "C" void on_stop_signal(int sig) { g_stop_signal.store(sig); }

// While a checkpointing run trains, SIGTERM and SIGINT ask it to finish the step, save and exit 0.
class StopSignals {
 public:
  explicit StopSignals(bool active) : active_(active) {
    if (!active_) return;
    g_stop_signal.store(0);
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sa.sa_flags = SA_RESTART;  // collectives blocked in a syscall carry on
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGTERM, &sa, &old_term_);
    ::sigaction(SIGINT, &sa, &old_int_);
  }
  ~StopSignals() {
    if (!active_) return;
    ::sigaction(SIGTERM, &old_term_, nullptr);
    ::sigaction(SIGINT, &old_int_, nullptr);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  bool active_;
  struct sigaction old_term_ {
  }, old_int_{};
};

// train.resume: loads the checkpoint it names into the engine; returns the steps already done.
int64_t resume_from(const config::TrainConfig& train, const std::string& checkpoint_dir,
                    zero::Engine& engine, bool rank0) {
  namespace fs = std::filesystem;
  std::string dir = checkpoint_dir, tag;
  if (train.resume == "auto") {
    if (!checkpoint::read_latest(checkpoint_dir)) {
      if (rank0) log::info("resume auto: no checkpoint in ", checkpoint_dir, "; starting fresh");
      return 0;
    }
  } else if (fs::exists(fs::path(train.resume) / checkpoint::kManifestName)) {
    const fs::path path = fs::path(train.resume).lexically_normal();
    const fs::path p = path.has_filename() ? path : path.parent_path();
    dir = p.parent_path().string();
    tag = p.filename().string();
  } else {
    tag = train.resume;
  }
  const auto t0 = Clock::now();
  const zero::LoadedCheckpoint loaded = engine.load_checkpoint(dir, tag);
  const auto client = nlohmann::json::parse(loaded.client_state_json);
  const int64_t step = client.value("step", loaded.global_steps);
  if (rank0)
    log::info("resumed from ", loaded.path, " (saved by ", loaded.saved_world_size,
              " rank(s) at ZeRO stage ", loaded.saved_stage, ") at step ", step, " in ",
              seconds_since(t0), " s");
  return step;
}

int64_t directory_bytes(const std::string& dir) {
  int64_t total = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.is_regular_file()) total += static_cast<int64_t>(e.file_size());
  return total;
}

// Mean of a per-rank scalar over all ranks.
double mean_over_ranks(comm::Group& group, double value) {
  auto t = torch::full({1}, value, torch::kDouble);
  group.all_reduce(t, comm::ReduceOp::kAvg);
  return t.item<double>();
}

std::vector<int64_t> gather_over_ranks(comm::Group& group, int64_t value) {
  auto all = torch::zeros({group.size()}, torch::kLong);
  group.all_gather(all, torch::full({1}, value, torch::kLong));
  return std::vector<int64_t>(all.data_ptr<int64_t>(), all.data_ptr<int64_t>() + all.numel());
}

// Mean validation loss over eval_batches micro-batches per rank (the same batches every time).
double evaluate(models::Gpt& model, const data::DistributedSampler& sampler, int64_t batches,
                comm::Group& group) {
  torch::NoGradGuard no_grad;
  model->eval();
  double sum = 0.0;
  for (int64_t i = 0; i < batches; ++i) {
    auto batch = sampler.batch(/*step=*/i, /*micro_step=*/0);
    sum += model->loss(batch.inputs, batch.targets).item<double>();
  }
  model->train();
  return mean_over_ranks(group, sum / static_cast<double>(batches));
}

config::DType dtype_of(at::ScalarType type) {
  if (type == at::kBFloat16) return config::DType::kBf16;
  if (type == at::kHalf) return config::DType::kFp16;
  return config::DType::kFp32;
}

double mib(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

void print_progress(int64_t step, int64_t steps, double loss, double val_loss,
                    const zero::StepResult& result, double tokens_per_s, double step_time,
                    int64_t max_rss, int64_t model_state_bytes) {
  char val[32] = "";
  if (val_loss >= 0) std::snprintf(val, sizeof val, " | val %.4f", val_loss);
  std::printf(
      "step %lld/%lld | loss %.4f%s | lr %.3e | grad norm %.3f | %.0f tok/s | %.3f s/step"
      " | rss/rank max %.0f MiB | model states/rank %.1f MiB\n",
      static_cast<long long>(step), static_cast<long long>(steps), loss, val, result.lr,
      result.grad_norm, tokens_per_s, step_time, mib(max_rss), mib(model_state_bytes));
  std::fflush(stdout);
}

// Test hook: DEEPSHARD_TEST_FAIL_AT_STEP=S (and optionally DEEPSHARD_TEST_FAIL_RANK=R, default 0)
// makes that rank throw at the start of step S, to test how a dying rank is handled.
void maybe_inject_failure(int64_t step, int rank) {
  static const char* at = std::getenv("DEEPSHARD_TEST_FAIL_AT_STEP");
  static const char* who = std::getenv("DEEPSHARD_TEST_FAIL_RANK");
  if (at == nullptr || std::atoll(at) != step) return;
  if ((who ? std::atoi(who) : 0) != rank) return;
  throw Error("injected failure at step " + std::to_string(step) +
              " (DEEPSHARD_TEST_FAIL_AT_STEP)");
}

}  // namespace

models::GptConfig gpt_config(const config::ModelConfig& m) {
  models::GptConfig c;
  c.n_layer = m.n_layer;
  c.n_head = m.n_head;
  c.n_embd = m.n_embd;
  c.block_size = m.block_size;
  c.vocab_size = m.vocab_size;
  c.dropout = m.dropout;
  c.bias = m.bias;
  return c;
}

TrainSummary run_training(const config::RunConfig& run, comm::Group& group) {
  const auto& ds = run.ds;
  const bool rank0 = group.rank() == 0;
  DS_CHECK(!run.data.train.empty(), ConfigError, "data.train: no training token file given");
  std::filesystem::create_directories(run.train.run_dir);
  RunMonitors monitors(run, group);  // before anything communicates (the comms logger counts)

  torch::manual_seed(run.train.seed + static_cast<uint64_t>(group.rank()));  // dropout streams
  auto gpt_cfg = gpt_config(run.model);
  // Stage 3 builds the model under zero.Init (each block partitioned as soon as it exists), unless
  // Hugging Face weights are loaded into the full model afterwards. The blocks take the training
  // dtype as they are built (bf16; fp16 on CPU computes in fp32).
  std::unique_ptr<zero::PartitionedBuild> zero_init;
  if (ds.zero.stage == 3 && run.model.init_from.empty()) {
    zero_init = std::make_unique<zero::PartitionedBuild>(
        group, ds.bf16.enabled ? at::kBFloat16 : at::kFloat);
  }
  models::Gpt model(gpt_cfg, run.train.seed,
                    zero_init ? zero_init->block_hook() : models::GptImpl::BlockBuilt());
  // Fine-tuning: Hugging Face GPT-2 weights replace the fresh init (every rank reads the file; the
  // engine then broadcasts rank 0's parameters anyway).
  if (!run.model.init_from.empty()) checkpoint::load_gpt2_safetensors(model, run.model.init_from);

  data::TokenFile train_file(run.data.train, gpt_cfg.vocab_size);
  data::DistributedSampler sampler(
      train_file, gpt_cfg.block_size, ds.train_micro_batch_size_per_gpu,
      ds.gradient_accumulation_steps, group.rank(), group.size(), run.train.seed);
  std::unique_ptr<data::TokenFile> valid_file;
  std::unique_ptr<data::DistributedSampler> valid_sampler;
  if (!run.data.valid.empty()) {
    valid_file = std::make_unique<data::TokenFile>(run.data.valid, gpt_cfg.vocab_size);
    valid_sampler = std::make_unique<data::DistributedSampler>(
        *valid_file, gpt_cfg.block_size, ds.train_micro_batch_size_per_gpu, 1, group.rank(),
        group.size(), run.train.seed + 1);
  }

  // Mixed precision: parameters and activations in the low-precision dtype; the engine keeps the
  // fp32 master copy and gradient accumulation. libtorch 1.13 has no fp16 CPU kernels (layer
  // norm, matmul): on CPU an fp16 run keeps fp32 compute and only the loss scaling applies.
  const auto device = model->parameters().front().device();
  if (ds.bf16.enabled) model->to(torch::kBFloat16);
  if (ds.fp16.enabled && !device.is_cpu()) model->to(torch::kHalf);
  if (ds.fp16.enabled && device.is_cpu() && rank0)
    log::warn("fp16 on CPU: no fp16 kernels in libtorch 1.13; the model computes in fp32 with ",
              "fp16's dynamic loss scaling");
  if (run.train.save_weights) check_weights_savable(ds);  // before the training, not after it
  auto engine = zero::Engine::initialize(model.ptr(), ds, group, zero_init.get());
  monitors.attach(*model);
  auto estimate_in = zero::estimate_input(ds, engine->num_parameters(), group.size(),
                                          dtype_of(model->parameters().front().scalar_type()));
  estimate_in.persistent_params = engine->persistent_parameters();
  estimate_in.largest_unit_params = engine->largest_unit_parameters();
  const auto memory_estimate = zero::estimate_model_states(estimate_in);
  if (run.train.memory_report && rank0) {
    std::printf("%s", format_memory_report(engine->ledger(), memory_estimate).c_str());
    std::fflush(stdout);
  }
  if (rank0) {
    log::info("model ", run.model.preset, ": ", engine->num_parameters(), " parameters; ",
              group.size(), " rank(s); ZeRO stage ", ds.zero.stage, "; global batch ",
              ds.train_batch_size, " = ", ds.train_micro_batch_size_per_gpu, " x ",
              ds.gradient_accumulation_steps, " x ", group.size(), " sequences of ",
              gpt_cfg.block_size, " tokens");
  }

  const bool checkpointing = run.train.save_interval > 0 || !run.train.checkpoint_dir.empty();
  const std::string checkpoint_dir = run.train.checkpoint_dir.empty()
                                         ? run.train.run_dir + "/checkpoints"
                                         : run.train.checkpoint_dir;
  const int64_t start_step =
      run.train.resume.empty() ? 0 : resume_from(run.train, checkpoint_dir, *engine, rank0);
  StopSignals stop_signals(checkpointing);
  // Recompute (train.activation_checkpointing) and the activation meter, for the training loop.
  ActivationTracker activations(run, rank0);
  const int64_t print_interval = ds.steps_per_print.value_or(run.train.log_interval);

  std::unique_ptr<monitor::JsonlWriter> metrics;
  if (rank0)
    metrics = std::make_unique<monitor::JsonlWriter>(run.train.run_dir + "/metrics.jsonl",
                                                     /*append=*/start_step > 0);

  TrainSummary summary;
  const double tokens_per_step =
      static_cast<double>(ds.train_batch_size) * static_cast<double>(gpt_cfg.block_size);
  double tokens_per_s_sum = 0.0;
  int64_t timed_steps = 0;
  comm::CommStats comm_before = group.log().total();
  double timed_wait = 0.0, timed_time = 0.0;  // comm wait and wall time of the timed steps
  const int64_t log_interval = std::max<int64_t>(1, run.train.log_interval);

  for (int64_t step = start_step; step < run.train.steps; ++step) {
    maybe_inject_failure(step + 1, group.rank());
    const auto t0 = Clock::now();
    double loss_sum = 0.0;
    zero::StepResult result;
    for (int64_t micro = 0; micro < ds.gradient_accumulation_steps; ++micro) {
      auto batch = sampler.batch(step, micro);
      monitors.before_forward(step, micro);
      auto loss = activations.forward([&] { return model->loss(batch.inputs, batch.targets); });
      monitors.after_forward();
      engine->backward(loss);
      monitors.after_backward();
      result = engine->step();
      monitors.after_micro_step();
      loss_sum += loss.item<double>();
    }
    DS_ASSERT(result.boundary, "the accumulation window did not end with the step");
    const double step_time = seconds_since(t0);
    // The loss mean also tells every rank whether any rank was asked to stop.
    auto shared = torch::tensor(
        {loss_sum / ds.gradient_accumulation_steps, g_stop_signal.load() != 0 ? 1.0 : 0.0},
        torch::kDouble);
    group.all_reduce(shared, comm::ReduceOp::kAvg);
    const double loss = shared[0].item<double>();
    const bool stop = shared[1].item<double>() > 0;
    const double tokens_per_s = tokens_per_step / step_time;
    const comm::CommStats comm_now = group.log().total();
    const double comm_wait = comm_now.wait_seconds - comm_before.wait_seconds;
    if (step > start_step) {
      tokens_per_s_sum += tokens_per_s;
      ++timed_steps;
      timed_wait += comm_wait;
      timed_time += step_time;
    }
    DS_CHECK(std::isfinite(loss), Error, "step ", step + 1, ": the training loss is ", loss);
    summary.final_loss = loss;
    summary.steps = step + 1;

    nlohmann::json record = {{"step", step + 1},
                             {"loss", loss},
                             {"lr", result.lr},
                             {"grad_norm", result.grad_norm},
                             {"loss_scale", result.loss_scale},
                             {"skipped", result.skipped},
                             {"tokens_per_s", tokens_per_s},
                             {"step_time_s", step_time},
                             {"comm_wait_s", comm_wait},
                             {"comm_bytes", comm_now.bytes - comm_before.bytes},
                             {"rss_bytes", monitor::current_rss_bytes()}};
    comm_before = comm_now;
    record.update(activations.end_step());
    record["memory"] = memory_profile_json(engine->ledger(), activations.last_step(),
                                           record["rss_bytes"].get<int64_t>());
    if (ds.memory_breakdown && rank0 && (step + 1) % print_interval == 0) {
      std::printf("%s", format_memory_breakdown(step + 1, record["memory"]).c_str());
      std::fflush(stdout);
    }

    const bool last = step + 1 == run.train.steps;
    const bool eval_now =
        valid_sampler &&
        ((run.train.eval_interval > 0 && (step + 1) % run.train.eval_interval == 0) || last);
    if (eval_now) {
      summary.final_val_loss = evaluate(model, *valid_sampler, run.train.eval_batches, group);
      record["val_loss"] = summary.final_val_loss;
    }
    if ((step + 1) % log_interval == 0 || step == 0 || last || eval_now) {
      auto rss = gather_over_ranks(group, monitor::current_rss_bytes());
      if (rank0)
        print_progress(step + 1, run.train.steps, loss, eval_now ? summary.final_val_loss : -1,
                       result, tokens_per_s, step_time, *std::max_element(rss.begin(), rss.end()),
                       engine->ledger().model_state_bytes());
    }
    monitors.on_step(step, record);
    if (metrics) metrics->write(record);

    const bool periodic =
        run.train.save_interval > 0 && ((step + 1) % run.train.save_interval == 0 || last);
    if (checkpointing && (periodic || stop)) {
      const std::string tag = "step" + std::to_string(step + 1);
      const nlohmann::json client = {{"step", step + 1},
                                     {"seed", run.train.seed},
                                     {"data_train", run.data.train},
                                     {"world_size", group.size()},
                                     {"run_config", nlohmann::json::parse(run.resolved_json)},
                                     {"model",
                                      {{"preset", run.model.preset},
                                       {"n_layer", gpt_cfg.n_layer},
                                       {"n_head", gpt_cfg.n_head},
                                       {"n_embd", gpt_cfg.n_embd},
                                       {"block_size", gpt_cfg.block_size},
                                       {"vocab_size", gpt_cfg.vocab_size},
                                       {"bias", gpt_cfg.bias}}}};
      const auto s0 = Clock::now();
      engine->save_checkpoint(checkpoint_dir, tag, client.dump());
      if (rank0) {
        const double seconds = seconds_since(s0);
        const double mb = directory_bytes(checkpoint::tag_path(checkpoint_dir, tag)) / 1e6;
        log::info("saved checkpoint ", checkpoint::tag_path(checkpoint_dir, tag), ": ", mb,
                  " MB in ", seconds, " s (", mb / seconds, " MB/s)");
      }
    }
    if (stop) {
      if (rank0)
        log::info("stop requested (signal): stopped after step ", step + 1, " of ", run.train.steps,
                  checkpointing ? ", checkpoint saved" : "");
      summary.stopped = true;
      break;
    }
  }

  summary.mean_tokens_per_s = timed_steps > 0 ? tokens_per_s_sum / timed_steps : 0.0;
  summary.comm_wait_share = timed_time > 0 ? timed_wait / timed_time : 0.0;
  summary.peak_rss_bytes = gather_over_ranks(group, monitor::peak_rss_bytes());

  if (run.train.save_weights) {
    save_model_weights(*engine, model, run.train.run_dir + "/model.safetensors");
  }

  // At stage 3 every rank runs the sampling forward: it gathers parameters collectively.
  if (run.train.sample_tokens > 0 && !summary.stopped && (rank0 || ds.zero.stage == 3)) {
    data::ByteTokenizer tokenizer;
    auto prompt16 = tokenizer.encode(run.train.sample_prompt);
    std::vector<int64_t> prompt(prompt16.begin(), prompt16.end());
    auto tokens = model->generate(prompt, run.train.sample_tokens, run.train.sample_temperature,
                                  run.train.sample_top_k, run.train.seed);
    summary.sample = run.train.sample_prompt + tokenizer.decode(tokens);
  }

  if (rank0) {
    const auto& ledger = engine->ledger();
    nlohmann::json memory = nlohmann::json::object(), peak = nlohmann::json::object();
    for (int c = 0; c < static_cast<int>(zero::MemoryCategory::kCount); ++c) {
      auto category = static_cast<zero::MemoryCategory>(c);
      memory[zero::to_string(category)] = ledger.bytes(category);
      peak[zero::to_string(category)] = ledger.peak_bytes(category);
    }
    memory["model_states"] = ledger.model_state_bytes();
    nlohmann::json out = {{"steps", summary.steps},
                          {"final_loss", summary.final_loss},
                          {"mean_tokens_per_s", summary.mean_tokens_per_s},
                          {"comm_wait_share", summary.comm_wait_share},
                          {"world_size", group.size()},
                          {"num_parameters", engine->num_parameters()},
                          {"peak_rss_bytes", summary.peak_rss_bytes},
                          {"ledger_bytes_rank0", memory},
                          {"ledger_peak_bytes_rank0", peak},
                          {"comm", nlohmann::json::object()},
                          {"config", nlohmann::json::parse(run.resolved_json)}};
    out["memory_report"] = memory_report_json(ledger, memory_estimate);
    out["memory_profile"] =
        memory_peak_json(ledger, activations.run_peak(), summary.peak_rss_bytes.at(0));
    out["comm_estimate_per_step"] =
        comm_estimate_json(zero::estimate_comm_per_step(estimate_in), group.size());
    if (summary.final_val_loss >= 0) out["final_val_loss"] = summary.final_val_loss;
    if (!summary.sample.empty()) out["sample"] = summary.sample;
    for (const auto& [op, stats] : group.log().snapshot()) {
      out["comm"][op] = {{"calls", stats.calls},
                         {"bytes", stats.bytes},
                         {"seconds", stats.seconds},
                         {"wait_seconds", stats.wait_seconds}};
    }
    monitors.finish(out);
    monitor::write_json_file(run.train.run_dir + "/summary.json", out);
  }
  return summary;
}

}  // namespace deepshard::train
