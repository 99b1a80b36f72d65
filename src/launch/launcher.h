// `deepshard launch`: starts the local ranks of a job with torchrun's environment variables,
// prefixes each output line with its rank, forwards SIGINT/SIGTERM, and when any rank fails stops
// the others and exits non-zero within 30 s, naming the rank and printing its last lines.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace deepshard::launch {

// The launcher's environment, read once by parse_launch_args (the launcher reads no variable after
// it): what decides the job token, the ranks' thread variables and the node line.
struct LaunchEnvironment {
  std::optional<std::string> job_token;       // DEEPSHARD_JOB_TOKEN
  std::optional<std::string> slurm_job_id;    // SLURM_JOB_ID (srun started this launcher)
  std::optional<std::string> slurm_step_id;   // SLURM_STEP_ID
  std::optional<std::string> openmpi_job_id;  // OMPI_MCA_ess_base_jobid (mpirun did)
  std::optional<std::string> socket_ifname;   // GLOO_SOCKET_IFNAME
  // OMP_NUM_THREADS, OPENBLAS_NUM_THREADS, OMP_WAIT_POLICY: the ones the user set (kept as set).
  std::vector<std::string> thread_variables_set;
};

// The variables above from this process's environment (empty values count as unset).
LaunchEnvironment launch_environment_from_process();

struct LaunchOptions {
  int nproc_per_node = 1;                 // -n
  int nnodes = 1;                         // --nnodes
  int node_rank = 0;                      // --node-rank
  std::string master_addr = "127.0.0.1";  // --master-addr
  int master_port = 0;    // --master-port (0: a free port on one node, 29500 on several)
  double grace_s = 10.0;  // after a failure, SIGTERM then SIGKILL after this many seconds
  bool set_thread_env =
      true;  // OMP/OPENBLAS threads = cores / local ranks, OMP_WAIT_POLICY=PASSIVE
  std::vector<std::string> command;  // the per-rank command
  // --autotuning tune|run: search the command's config (a `deepshard train` job) instead of running
  // it once; "run" then trains with the best configuration found (docs/autotuning.md).
  std::string autotuning;
  // --memory-budget BYTES: memory per rank the tuner's experiments must fit (0: the memory
  // available when tuning starts, split over the local ranks). Only with --autotuning.
  int64_t memory_budget = 0;
  LaunchEnvironment environment;  // parse_launch_args reads it from the process
};

// Parses `launch` arguments (after the subcommand). Throws UsageError.
LaunchOptions parse_launch_args(const std::vector<std::string>& args);

// Throws UsageError naming the first field out of range (or an empty command).
void validate_launch_options(const LaunchOptions& options);

// Runs the job; returns the exit status for the launcher process: 0 when every rank exited 0.
// Output goes to stdout with "[rank R] " prefixes; launcher messages to stderr.
int launch(const LaunchOptions& options);

// A TCP port that is free on every interface right now, below the kernel's ephemeral range (so no
// outgoing connection can take it before the store binds it).
int find_free_port();

std::string launch_usage();

// True when `args` (after the subcommand) ask for the usage: -h or --help before the command's
// "--".
bool launch_help_requested(const std::vector<std::string>& args);

// The token of this job for DEEPSHARD_JOB_TOKEN: the launcher's own DEEPSHARD_JOB_TOKEN, else the
// job id of srun or mpirun, else a random one (one node only: several nodes must share it, a
// UsageError says so).
std::string job_token(const LaunchOptions& options);

}  // namespace deepshard::launch
