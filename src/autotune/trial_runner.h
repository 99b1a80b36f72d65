// Runs one experiment as a short real job: `deepshard launch -n N -- <the user's train command
// with the experiment's overrides>` in a process group of its own, its output in the experiment's
// stdout.log, its ranks' resident memory watched against the trial's limit. A trial that exceeds
// the limit has its ranks killed (then the launcher stops and reports as after any rank failure),
// one that fails or hangs is stopped too; either way the outcome is recorded and the tuner goes on.
// Private to the autotune layer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "autotune/experiment.h"

namespace deepshard::autotune {

struct TrialSpec {
  std::string deepshard_exe;             // the launcher to run
  int ranks = 1;                         // -n
  bool set_thread_env = true;            // the launcher's --no-thread-env when false
  std::vector<std::string> command;      // the per-rank command
  std::string result_dir;                // the experiment's folder (stdout.log, run/)
  int64_t memory_limit = 0;              // bytes of resident memory per rank (0: none)
  double timeout_s = 600;                // the whole trial
  int64_t start_step = 3, end_step = 5;  // the measured steps (1-based, inclusive)
};

// Runs the trial and reads its measurements from result_dir/run (metrics.jsonl, summary.json).
// The status is kRan, kOutOfMemory (the limit, or the ranks' own allocation failure) or kFailed
// (with the reason: the exit status and the last line that names an error).
ExperimentResult run_trial(const TrialSpec& spec);

// The measurements of a finished run folder over steps [start_step, end_step]: latency,
// throughput, FLOPS, compute and comm per step, peak RSS. Throws Error naming what is missing.
ExperimentResult read_trial_metrics(const std::string& run_dir, int64_t start_step,
                                    int64_t end_step);

}  // namespace deepshard::autotune
