// DeepSpeed's autotuner for deepshard: `deepshard launch --autotuning tune|run [launch options] --
// deepshard train --config RUN.json ...` profiles the model, explores ZeRO stages, micro-batch
// sizes (and, with autotuning.fast false, each stage's knobs) with short real runs of the job on
// the launch's ranks, prunes with the memory estimate what cannot fit the memory budget, and writes
// the best configuration (results_dir/ds_config_optimal.json, run_optimal.json, cmd_optimal.txt);
// "run" then trains with it. docs/autotuning.md.
#pragma once

#include <string>

#include "launch/launcher.h"

namespace deepshard::autotune {

struct AutotuneRequest {
  launch::LaunchOptions launch;  // -n, --memory-budget, --autotuning tune|run and the command
  std::string deepshard_exe;     // the executable whose `launch` starts each experiment
};

// Tunes (and with "run" trains); returns the exit status: 0 when a best configuration was found
// (and, with "run", the training exited 0). Configuration problems throw ConfigError/UsageError.
int run_autotuning(const AutotuneRequest& request);

}  // namespace deepshard::autotune
