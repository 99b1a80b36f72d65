// The tuner's pieces without processes: DeepSpeed's micro-batch list, the knob space, the searches'
// order and stopping rules, the cost model, the memory prediction and the experiment names.
#include "autotune/search.h"

#include <gtest/gtest.h>

#include <list>

#include "autotune/cost_model.h"
#include "autotune/memory_fit.h"
#include "autotune/tuning_knobs.h"
#include "autotune/tuning_space.h"
#include "deepshard/config/loader.h"
#include "models/registry.h"
#include "zero/estimator.h"

namespace deepshard::autotune {
namespace search_test {

using nlohmann::json;

// The context of `user` (kept alive for the test binary: contexts point at their config).
SpaceContext context(const json& user, int64_t dp = 2) {
  static std::list<json> keep;
  keep.push_back(user);
  SpaceContext c;
  c.user_config = &keep.back();
  c.data_parallel = dp;
  return c;
}

TEST(TuningSpace, DeepSpeedsMicroBatchList) {
  // max 8: the upper half 4..7 with stride (8-4)/3 = 1, those with accumulation 1 (5, 6, 7) left
  // out, then 8; the smallest first.
  EXPECT_EQ(micro_batch_candidates(1, 8, 3), (std::vector<int64_t>{1, 4, 8}));
  EXPECT_EQ(micro_batch_candidates(2, 2, 3), (std::vector<int64_t>{2}));
  EXPECT_EQ(micro_batch_candidates(3, 100, 3), (std::vector<int64_t>{3, 50, 100}));
}

TEST(TuningSpace, StagesMicroBatchesAndNames) {
  auto c = context({{"zero_optimization", {{"stage", json::array({1, 3})}}},
                    {"train_micro_batch_size_per_gpu", 2},
                    {"gradient_accumulation_steps", 2}});
  c.autotuning.max_train_batch_size = 32;
  EXPECT_EQ(stages_to_tune(c), (std::vector<int>{1, 3}));
  EXPECT_EQ(min_micro_batch(c), 2);
  EXPECT_EQ(max_micro_batch(c), 16);  // 32 over 2 replicas
  EXPECT_EQ(batch_per_replica(c, 16), 16);
  const Experiment e = make_experiment(c, 3, 4, 16);
  EXPECT_EQ(e.name, "z3_gas4_tmbspg4");
  EXPECT_EQ(e.train_batch, 32);
  EXPECT_EQ(e.overrides.at("gradient_accumulation_steps"), 4);
  const Experiment k =
      make_experiment(c, 2, 4, 16, {{"zero_optimization.reduce_bucket_size", 50000000}});
  EXPECT_EQ(k.name, "z2_gas4_tmbspg4_rbs5e7");
  // Every stage runs with a pipeline too.
  EXPECT_EQ(stages_to_tune(context({{"pipeline", {{"stages", 2}}}})),
            (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(stages_to_tune(context(json::object())), (std::vector<int>{0, 1, 2, 3}));
  const auto listed = context({{"train_micro_batch_size_per_gpu", json::array({4, 1, 16})}});
  EXPECT_EQ(*user_micro_batch_list(listed), (std::vector<int64_t>{1, 4, 16}));
  EXPECT_EQ(baseline_experiment(listed).micro_batch, 1);
}

TEST(TuningKnobs, ProductAndUserOverrides) {
  // Stage 2 of a 1M-parameter model: 2 bucket sizes each (a quarter, 5e7 for every size at or
  // above the model), overlap, reduce_scatter, contiguous, offload, checkpointing: 2^7.
  EXPECT_EQ(knob_space(2, json::object(), 1'000'000).size(), 128u);
  // A value the user set is not tuned; a list replaces the defaults.
  const json user = {{"zero_optimization",
                      {{"overlap_comm", true},
                       {"reduce_scatter", json::array({true})},
                       {"contiguous_gradients", true},
                       {"offload_optimizer", {{"device", "none"}}},
                       {"reduce_bucket_size", json::array({1000, 2000, 3000})}}},
                     {"train", {{"activation_checkpointing", false}}}};
  const auto space = knob_space(2, user, 1'000'000);
  EXPECT_EQ(space.size(), 6u);  // reduce_bucket_size 3 x allgather_bucket_size 2
  for (const auto& o : space) EXPECT_FALSE(o.count("zero_optimization.overlap_comm"));
  EXPECT_EQ(knob_space(0, json::object(), 1'000'000).size(), 2u);  // checkpointing only
}

TEST(Search, GridOrderAndEarlyStopping) {
  std::vector<Experiment> exps(10);
  for (size_t i = 0; i < exps.size(); ++i) exps[i].name = "e" + std::to_string(i);
  auto search = make_search("gridsearch", "throughput", exps);
  std::vector<std::string> tried;
  // The best is the second; early stopping 3 stops after three more without a better one.
  const size_t n = run_search(*search, exps, 50, 3, "throughput", [&](const Experiment& e) {
    tried.push_back(e.name);
    ExperimentResult r;
    r.status = TrialStatus::kRan;
    r.throughput = e.name == "e1" ? 10 : 1;
    return r;
  });
  EXPECT_EQ(n, 5u);
  EXPECT_EQ(tried, (std::vector<std::string>{"e0", "e1", "e2", "e3", "e4"}));
  // tuner_num_trials bounds it; random visits each once in another order.
  auto random = make_search("random", "throughput", exps);
  std::vector<std::string> order;
  run_search(*random, exps, 4, 100, "throughput", [&](const Experiment& e) {
    order.push_back(e.name);
    ExperimentResult r;
    r.status = TrialStatus::kRan;
    r.throughput = double(order.size());
    return r;
  });
  EXPECT_EQ(order.size(), 4u);
  EXPECT_NE(order, (std::vector<std::string>{"e0", "e1", "e2", "e3"}));
}

// The cost model learns compute = accumulation x (c0 + c1 x micro-batch) plus each knob setting's
// offset: after the two initial trials and the micro-batch runs it picks the best knob setting at
// the largest micro-batch first.
TEST(Search, ModelBasedFollowsTheMeasuredCosts) {
  auto c = context(json::object(), 1);
  const auto exp = [&](int64_t mbs, bool offload) {
    return make_experiment(
        c, 1, mbs, 8,
        {{"zero_optimization.offload_optimizer", json{{"device", offload ? "cpu" : "none"}}}});
  };
  // Ground truth: 0.01 s + 0.02 s per sample per micro-step, offload adds 0.5 s per step.
  const auto truth = [](const Experiment& e) {
    ExperimentResult r;
    r.status = TrialStatus::kRan;
    const bool offload =
        e.overrides.at("zero_optimization.offload_optimizer").at("device") == "cpu";
    r.compute_s =
        double(e.accumulation) * (0.01 + 0.02 * double(e.micro_batch)) + (offload ? 0.5 : 0);
    r.comm_wait_s = 0.001 * double(e.accumulation);
    r.latency_ms = 1e3 * (r.compute_s + r.comm_wait_s);
    r.throughput = double(e.train_batch) / (r.compute_s + r.comm_wait_s);
    return r;
  };
  std::vector<Experiment> exps = {exp(1, true),  exp(2, true),  exp(8, true),
                                  exp(1, false), exp(2, false), exp(8, false)};
  auto search = make_search("model_based", "throughput", exps);
  std::vector<std::string> order;
  run_search(*search, exps, 4, 100, "throughput", [&](const Experiment& e) {
    order.push_back(e.name);
    return truth(e);
  });
  ASSERT_EQ(order.size(), 4u);
  EXPECT_EQ(order[0], exps[0].name);  // the initial two in order
  EXPECT_EQ(order[1], exps[1].name);
  // From (1, cpu) and (2, cpu) the model predicts 8 best (exactly: the truth is of the model's
  // form); without offload nothing is measured yet, the offload runs stand in: 8 again.
  EXPECT_EQ(order[2], exps[2].name);
  EXPECT_EQ(order[3], exps[5].name);
  CostModel model;
  for (const auto& e : {exps[0], exps[1], exps[3]}) model.add(e, truth(e));
  EXPECT_NEAR(model.predict_step_s(exps[5]), (0.01 + 0.02 * 8) + 0.001, 1e-6);
  EXPECT_NEAR(model.predict_step_s(exps[2]), (0.01 + 0.02 * 8) + 0.5 + 0.001, 1e-6);
  ExperimentResult oom;
  oom.status = TrialStatus::kOutOfMemory;
  model.add(exps[4], oom);
  EXPECT_EQ(model.predict_metric(exps[5], "throughput"), 0);  // larger than what failed
}

// The prediction adds the estimator's model states at the experiment's stage, the measured
// activations per sample times the micro-batch, and the process's own memory.
TEST(MemoryFit, PredictionFollowsStageAndMicroBatch) {
  ModelInfo info;
  info.num_params = 1'000'000;
  info.activation_bytes_per_sample = 3'000'000;
  info.baseline_bytes = 200'000'000;
  auto run_of = [](int stage, int64_t mbs) {
    json j = {{"train_micro_batch_size_per_gpu", mbs},
              {"gradient_accumulation_steps", 1},
              {"zero_optimization", {{"stage", stage}}},
              {"model", {{"preset", "tiny"}}},
              {"data", {{"train", "x.bin"}}}};
    std::vector<std::string> warnings;
    return config::parse_run_config(j, 2, &warnings, "t", models::arch_schemas());
  };
  const auto s0 = predict_memory(info, run_of(0, 4), 2);
  const auto s3 = predict_memory(info, run_of(3, 4), 2);
  EXPECT_EQ(s0.activations, 12'000'000);
  EXPECT_EQ(s0.baseline, 200'000'000);
  EXPECT_EQ(s0.model_states, 16 * 1'000'000);  // fp32 params, grads and Adam's two moments
  EXPECT_EQ(s3.model_states, 16 * 1'000'000 / 2);
  EXPECT_EQ(predict_memory(info, run_of(0, 8), 2).total() - s0.total(), 12'000'000);
}

// From the two largest sizes that ran: 8 -> 1000 MiB and 26 -> 1916 MiB (the `small` GPT at N = 2,
// docs/autotuning.md) grow 50.9 MiB a sample; a 2861 MiB budget less 3 % fits 16 more than 26.
TEST(MemoryFit, LargestFitByMeasuredPeaks) {
  constexpr int64_t MiB = 1 << 20;
  const std::vector<MeasuredPeak> peaks = {{8, 1000 * MiB}, {26, 1916 * MiB}, {8, 1011 * MiB}};
  EXPECT_EQ(largest_fit_by_measured_peaks(peaks, 2861 * MiB), 42);
  EXPECT_EQ(largest_fit_by_measured_peaks({{8, 1000 * MiB}}, 2861 * MiB), std::nullopt);
  EXPECT_EQ(largest_fit_by_measured_peaks({{8, 1000 * MiB}, {26, 900 * MiB}}, 2861 * MiB),
            std::nullopt);  // a peak that does not grow with the batch gives no slope
  EXPECT_EQ(largest_fit_by_measured_peaks(peaks, 1950 * MiB), std::nullopt);  // nothing more fits
}

}  // namespace search_test
}  // namespace deepshard::autotune
