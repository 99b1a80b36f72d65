// Shared by the end-to-end training tests: a small token file made from the repository's own
// headers, and a `deepshard train` run of a tiny GPT whose metrics.jsonl losses are read back.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/test_support.h"

namespace deepshard::testing {

// Prepares <dir>/text.bin (+ text.valid.bin) from tests/train/data/corpus.txt with
// `deepshard prepare-data`.
std::string make_token_file(const TempDir& dir);

// The run file of the tiny GPT used by the training tests (JSON text). `extra` is merged in.
std::string tiny_run_config(const std::string& data, const std::string& run_dir, int64_t micro,
                            int64_t gas, int64_t steps, const std::string& extra = "{}");

// <dir>/run_<name>/summary.json.
nlohmann::json read_summary(const TempDir& dir, const std::string& name);

// The records of <run_dir>/metrics.jsonl, one per step.
std::vector<nlohmann::json> read_metrics(const std::string& run_dir);

struct RunLosses {
  std::vector<double> losses;
  bool clipped = false;  // some step's grad_norm exceeded the clip threshold
  std::string output;
};

// The losses of <run_dir>/metrics.jsonl (a run made elsewhere), `output` kept for messages.
RunLosses losses_of(const std::string& run_dir, const std::string& output);

// Trains `steps` (20) steps of the tiny GPT with `ranks` ranks (clip 0.5, so clipping is active)
// and returns the losses per step from metrics.jsonl. Fails the test if the run fails.
RunLosses train_and_read_losses(const TempDir& dir, const std::string& data, int ranks,
                                int64_t micro, int64_t gas, const std::string& name,
                                const std::string& extra = "{}", int64_t steps = 20);

// A longer 2-rank run of the tiny GPT judged by where it ends: the mean loss of its last 10 steps
// and the comm-log bytes per step (the mean over all steps, and the last step's).
struct LongRun {
  double final_loss = 0;
  double bytes_per_step = 0;
  double last_step_bytes = 0;
};
LongRun train_long(const TempDir& dir, const std::string& data, const std::string& name,
                   const std::string& extra, int64_t steps);

// Expects every loss of `run` within 1e-4 relative of `reference`'s (same number of steps);
// prints and returns the largest relative difference.
double expect_same_losses(const RunLosses& run, const RunLosses& reference,
                          const std::string& what);

// The grad_norm of every step of <dir>/run_<name>/metrics.jsonl.
std::vector<double> grad_norms(const TempDir& dir, const std::string& name);

// Expects every gradient norm of `run` within 1e-3 relative of `reference`'s (the model-parallel
// runs: the last step's norm is sensitive to the order of fp32 sums on its own — two single-rank
// runs that differ only in their thread count, plain and under `deepshard launch -n 1`, differ by
// 5.5e-4 at step 20 and by < 4e-8 on steps 1-19 — while the losses match to 1e-7); prints the
// largest relative difference. `order_noise` (optional, per step): the relative difference a mere
// change of summation order makes to the reference's norm on this machine (the same training on one
// rank with another micro-batch split); step i's bound is then 1e-3 + 4 · order_noise[i], so a
// step where the norm is ill-conditioned (a loss spike) allows what its own rounding moves it by,
// while a norm that misses a stage's or counts a tied gradient twice is off at every step.
void expect_same_norms(const std::vector<double>& run, const std::vector<double>& reference,
                       const std::string& what, const std::vector<double>& order_noise = {});

// The relative differences step by step between two runs' gradient norms (see expect_same_norms).
std::vector<double> norm_differences(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace deepshard::testing
