// The deepshard executable's dispatch (run_cli): to the subcommands declared in commands.h, each
// run through run_guarded (guarded_command.h), which prints errors (with usage for UsageError) and
// returns non-zero.
#include <cstdio>
#include <cstring>
#include <string>

#include "cli/commands.h"
#include "cli/guarded_command.h"
#include "cli/process_options.h"

namespace {

struct Command {
  const char* name;
  int (*run)(const deepshard::cli::Args&);
  const char* summary;
};

const Command kCommands[] = {
    {"launch", deepshard::cli::run_launch_command,
     "start N local ranks of a command with torchrun's environment"},
    {"train", deepshard::cli::run_train_command, "train a model from a run file"},
    {"config", deepshard::cli::run_config_command, "validate DeepSpeed or run config files"},
    {"estimate", deepshard::cli::run_estimate_command, "model-state memory per rank, stages 0-3"},
    {"prepare-data", deepshard::cli::run_prepare_data_command, "turn text into token files"},
    {"generate", deepshard::cli::run_generate_command,
     "sample text from a checkpoint or Hugging Face safetensors weights"},
    {"convert", deepshard::cli::run_convert_command,
     "write a checkpoint's weights as Hugging Face safetensors"},
    {"report", deepshard::cli::run_report_command, "HTML page of plots of run folders"},
    {"doctor", deepshard::cli::run_doctor_command,
     "CPU, BLAS kernels, threads, matmul GFLOP/s and the fastest precision here"},
};

void print_usage(FILE* out) {
  std::fprintf(out, "usage: deepshard COMMAND [ARGS...]   (deepshard COMMAND --help for more)\n\n");
  for (const auto& c : kCommands) std::fprintf(out, "  %-13s %s\n", c.name, c.summary);
}

}  // namespace

int deepshard::cli::run_cli(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    print_usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  for (const auto& c : kCommands) {
    if (std::strcmp(argv[1], c.name) != 0) continue;
    return deepshard::cli::run_guarded(c.name, [&] {
      deepshard::cli::apply_process_options(deepshard::cli::process_options());
      return c.run(deepshard::cli::Args(argv + 2, argv + argc));
    });
  }
  std::fprintf(stderr, "deepshard: unknown command '%s'\n\n", argv[1]);
  print_usage(stderr);
  return 2;
}
