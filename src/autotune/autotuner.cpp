// run_autotuning (src/autotune/autotuner.h): the tuning session. In order: the
// profile run (model facts for the memory prediction), the user's config as given (the baseline
// every result is compared with), each stage's micro-batch sizes (pruned by the prediction, the
// largest that fits added), in the non-fast mode each stage's knobs through the configured search
// (search.h), then the best configuration's files and, with "run", the training.
#include "autotune/autotuner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include "autotune/experiment.h"
#include "autotune/memory_fit.h"
#include "autotune/results_store.h"
#include "autotune/search.h"
#include "autotune/summary.h"
#include "autotune/trial_runner.h"
#include "autotune/tuning_knobs.h"
#include "autotune/tuning_space.h"
#include "autotune/user_job.h"
#include "config/autotuning_config.h"
#include "deepshard/config/loader.h"
#include "deepshard/config/parallel_config.h"
#include "deepshard/util/error.h"
#include "models/registry.h"
#include "util/fault_injection.h"
#include "util/stopwatch.h"

namespace deepshard::autotune {
namespace {

// The shortest time limit of a trial (process start and rendezvous included).
constexpr double kMinTrialTimeoutS = 120;

namespace fs = std::filesystem;

std::string mib(int64_t bytes) {
  char text[32];
  const double m = double(bytes) / (1 << 20);
  std::snprintf(text, sizeof text, m < 10 ? "%.2f MiB" : "%.0f MiB", m);
  return text;
}

void say(const std::string& line) {
  std::printf("deepshard autotuning: %s\n", line.c_str());
  std::fflush(stdout);
}

// MemAvailable of /proc/meminfo (bytes), 0 if unknown.
int64_t available_memory() {
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  int64_t kib = 0;
  while (in >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

std::string join(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    const bool quote = a.find_first_of(" \t\"'$") != std::string::npos || a.empty();
    out += quote ? "'" + a + "'" : a;
  }
  return out;
}

class Session {
 public:
  explicit Session(const AutotuneRequest& request)
      : request_(request), job_(request.launch.command), ranks_(request.launch.nproc_per_node) {
    std::vector<std::string> warnings;
    at_ = config::parse_autotuning_config(job_.config(), job_.origin(), &warnings);
    for (const auto& w : warnings) say("warning: " + w);
    if (!at_.enabled)
      say("warning: autotuning.enabled is false in " + job_.origin() +
          "; tuning anyway, as --autotuning asks");
    const auto parallel = config::parse_parallel_config(job_.config(), job_.origin());
    DS_CHECK(ranks_ % parallel.model_ranks() == 0, ConfigError, job_.origin(), ": ", ranks_,
             " ranks are not divisible by pipeline stages x tensor size (", parallel.model_ranks(),
             ")");
    if (at_.mp_size != parallel.model_ranks())
      say("warning: autotuning.mp_size " + std::to_string(at_.mp_size) +
          " is ignored: the model-parallel size is the run's pipeline stages x tensor size (" +
          std::to_string(parallel.model_ranks()) + ")");
    context_.user_config = &job_.config();
    context_.autotuning = at_;
    context_.data_parallel = ranks_ / parallel.model_ranks();
    budget_ = request.launch.memory_budget > 0 ? request.launch.memory_budget
                                               : available_memory() / ranks_;
    DS_CHECK(budget_ > 0, Error, "the memory available is unknown: give --memory-budget BYTES");
    store_ = std::make_unique<ResultsStore>(at_.results_dir, at_.exps_dir, at_.overwrite);
  }

  int run();

 private:
  // The overrides every trial gets besides its experiment's: a short run in its own folder that
  // saves, evaluates and samples nothing.
  Overrides trial_overrides(const std::string& result_dir) const;
  // `overrides` and, for each tunable key the user's config gives as a list and `overrides` does
  // not set, the list's first value (DeepSpeed's get_first_config).
  Overrides first_values(Overrides overrides) const;
  // The resolved config of the user's with `overrides` ("" if it does not parse): two experiments
  // with the same signature are the same run.
  std::string signature(const Overrides& overrides) const;
  // Predicts, prunes, runs (or reuses) and records `e`; returns its row.
  Row evaluate(Experiment e, bool predict = true);
  void profile();
  // The fast phase of `stage`; returns its experiments that ran.
  std::vector<Row> tune_micro_batches(int stage);
  // The largest micro-batch whose predicted peak fits the budget (none before the profile run).
  std::optional<int64_t> largest_fitting_micro_batch(int stage, int64_t per_replica);
  // The non-fast phase of `stage` over the micro-batch sizes that ran.
  void tune_knobs(int stage, const std::vector<Row>& fast_rows);
  std::optional<Row> best_row() const;
  void write_outputs(const Row& best);

  const AutotuneRequest& request_;
  UserJob job_;
  config::AutotuningConfig at_;
  int64_t ranks_;
  SpaceContext context_;
  int64_t budget_ = 0;
  std::unique_ptr<ResultsStore> store_;
  std::optional<ModelInfo> info_;
  // Seconds a trial may take per sample of its step (set by the profile run; 900 s bound the
  // profile run itself).
  double trial_timeout_s_ = 900;
  std::optional<Row> baseline_;
  std::string baseline_signature_;
  double previous_stage_best_ = 0;
};

Overrides Session::trial_overrides(const std::string& result_dir) const {
  return {{"train.steps", at_.end_profile_step},
          {"train.run_dir", result_dir + "/run"},
          {"train.log_interval", at_.end_profile_step},
          {"train.eval_interval", 0},
          {"train.save_interval", 0},
          {"train.checkpoint_dir", ""},
          {"train.resume", ""},
          {"train.sample_tokens", 0},
          {"train.save_weights", false},
          {"data.valid", ""},
          {"autotuning", nlohmann::json::object()}};  // the ranks train as told
}

Overrides Session::first_values(Overrides overrides) const {
  for (const std::string& path : tunable_paths()) {
    const nlohmann::json user = value_at_path(job_.config(), path);
    if (user.is_array() && !user.empty() && !overrides.count(path)) overrides[path] = user.front();
  }
  return overrides;
}

std::string Session::signature(const Overrides& overrides) const {
  try {
    std::vector<std::string> warnings;
    return config::parse_run_config(job_.config_with(first_values(overrides)), ranks_, &warnings,
                                    "signature", models::arch_schemas())
        .resolved_json;
  } catch (const std::exception&) {
    return "";
  }
}

Row Session::evaluate(Experiment e, bool predict) {
  Row row;
  const std::string dir = fs::absolute(store_->experiment_dir(e.name)).string();
  Overrides all = first_values(e.overrides);
  for (const auto& [k, v] : trial_overrides(dir)) all[k] = v;
  const nlohmann::json config = job_.config_with(all);
  const std::vector<std::string> command = job_.command_with(all);
  ExperimentResult& r = row.result;
  std::optional<config::RunConfig> run;
  try {
    std::vector<std::string> warnings;
    run = config::parse_run_config(config, ranks_, &warnings, e.name, models::arch_schemas());
    config::check_supported(run->ds);
    e.micro_batch = run->ds.train_micro_batch_size_per_gpu;
    e.accumulation = run->ds.gradient_accumulation_steps;
    e.train_batch = run->ds.train_batch_size;
    e.stage = run->ds.zero.stage;
  } catch (const std::exception& error) {
    r.status = TrialStatus::kFailed;
    r.reason = std::string("config: ") + error.what();
  }
  row.experiment = e;
  row.config_diff = e.overrides;
  if (run && predict && info_) {
    const MemoryPrediction p = predict_memory(*info_, *run, ranks_);
    r.memory_estimate = p.total();
    if (p.total() > budget_) {
      r.status = TrialStatus::kPruned;
      r.reason = "estimate " + mib(p.total()) + " > budget " + mib(budget_) + " (model states " +
                 mib(p.model_states) + ", buffers " + mib(p.buffers) + ", activations " +
                 mib(p.activations) + ", process " + mib(p.baseline) + ")";
    }
  }
  if (run && r.status != TrialStatus::kPruned && e.train_batch < at_.min_train_batch_size) {
    r.status = TrialStatus::kPruned;
    r.reason = "train batch " + std::to_string(e.train_batch) + " < min_train_batch_size " +
               std::to_string(at_.min_train_batch_size);
  }
  if (run && r.status != TrialStatus::kPruned) {
    if (auto earlier = store_->finished(e)) {
      const int64_t estimate = r.memory_estimate;
      r = *earlier;
      r.memory_estimate = estimate;
    } else {
      TrialSpec spec;
      spec.deepshard_exe = request_.deepshard_exe;
      spec.ranks = static_cast<int>(ranks_);
      spec.set_thread_env = request_.launch.set_thread_env;
      spec.command = command;
      spec.result_dir = dir;
      testing::FaultInjection* faults = testing::fault_injection();
      spec.memory_limit = faults ? faults->trial_memory_limit(e.name).value_or(budget_) : budget_;
      // The profile run trains one sample per step: scale its time by this experiment's samples.
      spec.timeout_s =
          std::max(kMinTrialTimeoutS,
                   trial_timeout_s_ * static_cast<double>(e.micro_batch * e.accumulation));
      spec.start_step = at_.start_profile_step;
      spec.end_step = at_.end_profile_step;
      const int64_t estimate = r.memory_estimate;
      r = run_trial(spec);
      r.memory_estimate = estimate;
    }
  }
  store_->record(row, run ? config : nlohmann::json(), join(command));
  std::string line = e.name + ": " + to_string(r.status);
  if (r.status == TrialStatus::kRan) {
    char text[160];
    std::snprintf(text, sizeof text, ", %s %.4g, peak RSS %s (estimate %s), %.1f s%s",
                  at_.metric.c_str(), metric_value(r, at_.metric), mib(r.peak_rss).c_str(),
                  r.memory_estimate > 0 ? mib(r.memory_estimate).c_str() : "-", r.wall_s,
                  r.reused ? ", reused" : "");
    line += text;
  } else {
    line += ": " + r.reason;
  }
  say(line);
  return row;
}

void Session::profile() {
  // DeepSpeed's profile run uses its smallest-memory config: stage 3 (DeepSpeed's 1 with a
  // pipeline, which deepshard shards at stage 3 too), one sample per micro-batch, no
  // accumulation.
  Experiment e = make_experiment(context_, 3, 1, 1);
  e.name = "profile_model_info";
  e.space = "profile";
  const Row row = evaluate(e, /*predict=*/false);
  DS_CHECK(row.result.status == TrialStatus::kRan, Error, "the profile run (", e.name,
           ") did not run: ", row.result.reason, "; see ", store_->experiment_dir(e.name),
           "/stdout.log");
  const std::string dir = store_->experiment_dir(e.name);
  info_ = model_info_from_run(dir + "/run", 1, at_.start_profile_step, at_.end_profile_step);
  write_text_file(dir + "/model_info.json", to_json(*info_).dump(2) + "\n");
  // A trial taking far longer than the profile run hangs: allow 20 times its wall time per sample
  // of a step (the profile run's steps have one).
  trial_timeout_s_ = 20.0 * row.result.wall_s;
  say("the model has " + std::to_string(info_->num_params) + " parameters; activations " +
      mib(info_->activation_bytes_per_sample) + " per sample, process " +
      mib(info_->baseline_bytes) + "; memory budget " + mib(budget_) + " per rank");
}

std::optional<int64_t> Session::largest_fitting_micro_batch(int stage, int64_t per_replica) {
  if (!info_) return std::nullopt;
  // Activations grow linearly with the micro-batch, so two predictions give the slope.
  const auto predicted = [&](int64_t m) -> std::optional<int64_t> {
    Experiment e = make_experiment(context_, stage, m, per_replica);
    Overrides all = first_values(e.overrides);
    for (const auto& [k, v] : trial_overrides("/tmp")) all[k] = v;
    try {
      std::vector<std::string> warnings;
      const auto run = config::parse_run_config(job_.config_with(all), ranks_, &warnings, e.name,
                                                models::arch_schemas());
      return predict_memory(*info_, run, ranks_).total();
    } catch (const std::exception&) {
      return std::nullopt;
    }
  };
  const auto one = predicted(1), two = predicted(2);
  if (!one || !two || *two <= *one || *one > budget_) return std::nullopt;
  return 1 + (budget_ - *one) / (*two - *one);
}

std::vector<Row> Session::tune_micro_batches(int stage) {
  const auto list = user_micro_batch_list(context_);
  const int64_t lo = list ? list->front() : min_micro_batch(context_);
  int64_t hi = list ? list->back() : std::max(lo, max_micro_batch(context_));
  // Without max_train_batch_size the largest size also sets the samples per step (times the
  // config's accumulation), so it is bounded first by what the estimate fits in the budget
  // (DeepSpeed's calculated maximum micro-batch), not left at max_train_micro_batch_size_per_gpu.
  if (!list && !context_.autotuning.max_train_batch_size) {
    if (const auto fit = largest_fitting_micro_batch(stage, /*per_replica=*/1); fit && *fit < hi) {
      hi = std::max(lo, *fit);
      say("z" + std::to_string(stage) + ": the largest micro-batch the estimate fits is " +
          std::to_string(*fit) + "; micro-batches " + std::to_string(lo) + ".." +
          std::to_string(hi));
    }
  }
  std::vector<int64_t> sizes =
      list ? *list : micro_batch_candidates(lo, hi, at_.num_tuning_micro_batch_sizes);
  const int64_t per_replica = batch_per_replica(context_, hi);
  std::vector<Experiment> exps;
  for (int64_t m : sizes) exps.push_back(make_experiment(context_, stage, m, per_replica));
  std::vector<Row> ran;
  int64_t largest_ran = 0;
  int64_t out_of_memory_at = 0;  // the smallest size that ran out of memory
  bool pruned_above = false;
  auto run_one = [&](const Experiment& e) {
    if (baseline_ && baseline_->result.status == TrialStatus::kRan &&
        !baseline_signature_.empty() && signature(e.overrides) == baseline_signature_) {
      say(e.name + ": the baseline's configuration; its result counts for " + e.space);
      Row same = *baseline_;
      same.experiment.space = e.space;
      ran.push_back(same);
      largest_ran = std::max(largest_ran, e.micro_batch);
      return;
    }
    const Row row = evaluate(e);
    if (row.result.status == TrialStatus::kRan) {
      ran.push_back(row);
      largest_ran = std::max(largest_ran, e.micro_batch);
    }
    if (row.result.status == TrialStatus::kPruned && row.result.memory_estimate > 0)
      pruned_above = true;
    if (row.result.status == TrialStatus::kOutOfMemory &&
        (out_of_memory_at == 0 || e.micro_batch < out_of_memory_at))
      out_of_memory_at = e.micro_batch;
  };
  for (const Experiment& e : exps) run_one(e);
  // With the list fixed by max_train_batch_size, a pruned largest size is replaced by the largest
  // the estimate fits (DeepSpeed probes it with runs).
  if (!list && pruned_above) {
    if (const auto fit = largest_fitting_micro_batch(stage, per_replica);
        fit && *fit > largest_ran && *fit < hi) {
      say("z" + std::to_string(stage) + ": the largest micro-batch that fits the budget is " +
          std::to_string(*fit));
      run_one(make_experiment(context_, stage, *fit, per_replica));
    }
  }
  // The estimate can be low (activations per sample are measured at one sample); when a size ran
  // out of memory, the peaks measured at the two largest sizes that ran give the slope instead.
  if (!list && out_of_memory_at > 0) {
    std::vector<MeasuredPeak> peaks;
    for (const Row& r : ran) peaks.push_back({r.experiment.micro_batch, r.result.peak_rss});
    if (const auto fit = largest_fit_by_measured_peaks(peaks, budget_);
        fit && *fit > largest_ran && *fit < out_of_memory_at) {
      say("z" + std::to_string(stage) + ": by the measured peaks, the largest micro-batch that " +
          "fits the budget is " + std::to_string(*fit));
      run_one(make_experiment(context_, stage, *fit, per_replica));
    }
  }
  return ran;
}

void Session::tune_knobs(int stage, const std::vector<Row>& fast_rows) {
  if (fast_rows.empty()) return;
  double stage_best = 0;
  bool first = true;
  for (const Row& r : fast_rows) {
    const double v = metric_value(r.result, at_.metric);
    if (first || better(v, stage_best, at_.metric)) stage_best = v;
    first = false;
  }
  // DeepSpeed's rule: a stage whose micro-batch phase did not beat the previous stage's best does
  // not get its knobs tuned.
  if (previous_stage_best_ > 0 && !better(stage_best, previous_stage_best_, at_.metric)) {
    say("z" + std::to_string(stage) +
        ": no better than the previous stage; its knobs are not tuned");
    return;
  }
  previous_stage_best_ = stage_best;
  if (at_.fast) return;
  std::vector<int64_t> sizes;
  for (const Row& r : fast_rows) sizes.push_back(r.experiment.micro_batch);
  const int64_t per_replica =
      fast_rows.front().experiment.micro_batch * fast_rows.front().experiment.accumulation;
  std::vector<Experiment> exps;
  for (const Overrides& knobs : knob_space(stage, job_.config(), info_ ? info_->num_params : 0)) {
    for (int64_t m : sizes) exps.push_back(make_experiment(context_, stage, m, per_replica, knobs));
  }
  if (exps.empty()) return;
  say("z" + std::to_string(stage) + ": " + std::to_string(exps.size()) + " knob experiments, " +
      at_.tuner_type + " search");
  auto search = make_search(at_.tuner_type, at_.metric, exps);
  for (const Row& r : fast_rows) search->learn(r.experiment, r.result);
  const size_t ran =
      run_search(*search, exps, at_.tuner_num_trials, at_.tuner_early_stopping, at_.metric,
                 [&](const Experiment& e) { return evaluate(e).result; });
  say("z" + std::to_string(stage) + ": " + std::to_string(ran) + " of " +
      std::to_string(exps.size()) + " knob experiments run");
}

std::optional<Row> Session::best_row() const {
  std::optional<Row> best;
  for (const Row& r : store_->rows()) {
    if (r.result.status != TrialStatus::kRan || r.experiment.space == "profile") continue;
    if (!best || better(metric_value(r.result, at_.metric), metric_value(best->result, at_.metric),
                        at_.metric))
      best = r;
  }
  return best;
}

void Session::write_outputs(const Row& best) {
  const fs::path dir = store_->results_dir();
  nlohmann::json run_file = job_.config_with(first_values(best.experiment.overrides));
  run_file.erase("autotuning");
  write_text_file((dir / "ds_config_optimal.json").string(),
                  deepspeed_keys(run_file).dump(2) + "\n");
  const std::string run_path = fs::absolute(dir / "run_optimal.json").string();
  write_text_file(run_path, run_file.dump(2) + "\n");
  std::vector<std::string> cmd = {request_.deepshard_exe, "launch", "-n", std::to_string(ranks_)};
  if (!request_.launch.set_thread_env) cmd.push_back("--no-thread-env");
  cmd.insert(cmd.end(), {"--", job_.command().at(0), "train", "--config", run_path});
  write_text_file((dir / "cmd_optimal.txt").string(), join(cmd) + "\n");
  write_summary(store_->results_dir(), store_->rows(), best, at_.metric);
}

int Session::run() {
  const auto t0 = std::chrono::steady_clock::now();
  say("results in " + store_->results_dir() +
      (at_.overwrite ? "" : " (finished experiments reused)"));
  profile();
  baseline_ = evaluate(baseline_experiment(context_));
  baseline_signature_ = signature(baseline_->experiment.overrides);
  for (int stage : stages_to_tune(context_)) tune_knobs(stage, tune_micro_batches(stage));
  const auto best = best_row();
  const double wall = util::seconds_since(t0);
  if (!best) {
    say("no experiment ran; see " + store_->results_dir() + "/results.jsonl");
    return 1;
  }
  write_outputs(*best);
  std::printf("%s", summary_table(store_->rows(), *best, at_.metric).c_str());
  char line[200];
  std::snprintf(line, sizeof line, "tuning completed in %.1f s; best: %s (%s %.4g); wrote %s", wall,
                best->experiment.name.c_str(), at_.metric.c_str(),
                metric_value(best->result, at_.metric),
                (fs::path(store_->results_dir()) / "ds_config_optimal.json").c_str());
  say(line);
  if (request_.launch.autotuning != "run") return 0;
  say("training with " + best->experiment.name);
  launch::LaunchOptions options = request_.launch;
  options.autotuning.clear();
  options.memory_budget = 0;
  options.command = {job_.command().at(0), "train", "--config",
                     fs::absolute(fs::path(store_->results_dir()) / "run_optimal.json").string()};
  return launch::launch(options);
}

}  // namespace

int run_autotuning(const AutotuneRequest& request) { return Session(request).run(); }

}  // namespace deepshard::autotune
