// `deepshard train --config RUN.json [--deepspeed DS.json] [--set key.path=value]...
// [--bf16-compute auto|native|fp32]`: reads the
// run file, merges a plain DeepSpeed file and the overrides, joins the process group from the
// environment (run it under `deepshard launch`, mpirun or srun for several ranks) and trains.
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "cli/process_options.h"
#include "comm/transport_options.h"
#include "deepshard/config/loader.h"
#include "deepshard/config/parallel_config.h"
#include "deepshard/train/trainer.h"
#include "kernels/bf16_compute.h"
#include "models/registry.h"
#include "parallel/process_groups.h"
#include "parallel/rank_grid.h"
#include "platform/blas_kernels.h"
#include "platform/cpu_info.h"
#include "platform/heap_policy.h"
#include "platform/kernel_isa.h"
#include "util/log.h"

namespace deepshard::cli {
namespace {

const char* kTrainUsage =
    "usage: deepshard train --config RUN.json [--deepspeed DS.json] [--set key.path=value]...\n"
    "                       [--memory-report] [--bf16-compute auto|native|fp32]\n"
    "\n"
    "Trains the model as the run file says. RUN.json holds DeepSpeed keys (zero_optimization,\n"
    "optimizer, scheduler, train_batch_size, ...) and deepshard's sections model, data, train\n"
    "and comm (see docs/config.md). --deepspeed merges a plain DeepSpeed config over it, so a\n"
    "DeepSpeed user's file works unchanged; --set overrides any key, e.g.\n"
    "--set zero_optimization.reduce_bucket_size=1e6 --set train.steps=50.\n"
    "--memory-report (= --set train.memory_report=true): rank 0 prints the memory ledger by\n"
    "category beside `deepshard estimate`'s prediction for the run (summary.json has it always).\n"
    "--bf16-compute auto|native|fp32: how a bf16 model multiplies. auto (the default): in fp32\n"
    "from its bf16 operands unless the CPU has bf16 arithmetic (AVX512-BF16, AMX) and libtorch's\n"
    "bf16 matmul passes a numeric check; native: libtorch's bf16 kernels; fp32: always fp32.\n"
    "Parameters, gradients and communication stay bf16 either way. Without the option,\n"
    "DEEPSHARD_BF16_COMPUTE (same values) sets it.\n"
    "Several ranks: deepshard launch -n 2 -- deepshard train --config RUN.json\n";

}  // namespace

int run_train_command(const Args& args) {
  ArgParser parser({"config", "deepspeed", "set", "bf16-compute"}, {"help", "memory-report"});
  parser.parse(args);
  if (parser.print_help_if_asked(kTrainUsage)) return 0;
  parser.reject_positional();
  const std::string run_path = parser.require("config");
  // OpenBLAS's generic fallback core: re-executes once with the matching kernels (see
  // platform/blas_kernels.h); under the launcher the ranks already have them.
  std::vector<std::string> argv = {"deepshard", "train"};
  argv.insert(argv.end(), args.begin(), args.end());
  const std::string blas = platform::ensure_blas_kernels(argv);
  const platform::HeapPolicy heap =
      platform::retain_freed_heap_memory(process_options().heap_request());

  nlohmann::json json = config::read_json_file(run_path);
  std::string origin = run_path;
  if (auto ds_path = parser.get("deepspeed")) {
    config::merge_json(json, config::read_json_file(*ds_path));
    origin += " + " + *ds_path;
  }
  for (const auto& assignment : parser.get_all("set")) config::apply_override(json, assignment);
  if (parser.has("memory-report")) config::apply_override(json, "train.memory_report=true");

  // How bf16 models multiply on this machine (kernels/bf16_compute.h), once, before anything is
  // built; the start-up line and summary.json's platform section say which and why.
  const std::optional<std::string> bf16_flag = parser.get("bf16-compute");
  const std::optional<std::string>& bf16_env = process_options().bf16_compute;
  const kernels::Bf16ComputeChoice bf16_compute = kernels::choose_bf16_compute(
      bf16_flag.value_or(bf16_env.value_or("auto")), platform::detect_cpu(),
      bf16_flag || !bf16_env ? "--bf16-compute" : "DEEPSHARD_BF16_COMPUTE");
  kernels::set_bf16_compute(bf16_compute);

  const auto info = comm::rendezvous_from_env();
  log::set_rank(info.rank);
  if (info.rank == 0) {
    log::info("BLAS: ", blas, "; heap: ", heap.reason,
              "; bf16 compute: ", kernels::to_string(bf16_compute.compute), " (",
              bf16_compute.reason, "); kernels: ", platform::kernel_isa_status());
  }
  std::vector<std::string> warnings;
  const auto run =
      config::parse_run_config(json, info.world_size, &warnings, origin, models::arch_schemas());
  if (info.rank == 0) {
    for (const auto& w : warnings) log::warn(w);
  }
  // What the run refuses, on every rank before any rendezvous: each rank prints the refusal and
  // exits on its own (after the rendezvous, the first rank to exit would close the store under
  // the others, which then report the lost rank instead of the refusal).
  config::check_supported(run.ds);
  if (const auto parallel = config::parse_parallel_config(json, origin);
      parallel.pipeline.enabled || parallel.tensor_parallel.enabled) {
    // The layout the pipeline/tensor_parallel sections ask for (the batch triple already counted
    // its data-parallel size); the trainer makes the groups.
    const auto grid = parallel::grid_from_config(parallel, info.world_size);
    if (info.rank == 0) log::info("rank grid: ", grid.describe());
  }
  comm::GroupOptions group_options;
  group_options.timeout =
      std::chrono::milliseconds(static_cast<int64_t>(run.comm.timeout_s * 1000));
  group_options.transport = comm::parse_transport(run.comm.transport, "comm.transport");
  auto group = comm::create_group(info, group_options);

  const auto summary = train::run_training(run, *group);
  if (info.rank == 0) {
    std::printf("done: %lld steps, final loss %.4f", static_cast<long long>(summary.steps),
                summary.final_loss);
    if (summary.final_val_loss >= 0) std::printf(", validation loss %.4f", summary.final_val_loss);
    std::printf(", %.0f tokens/s; run folder %s\n", summary.mean_tokens_per_s,
                run.train.run_dir.c_str());
    if (!summary.sample.empty()) std::printf("sample:\n%s\n", summary.sample.c_str());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace deepshard::cli
