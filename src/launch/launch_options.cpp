// `deepshard launch` arguments: parsing (torchrun's spellings with '-' or '_', "--opt value" or
// "--opt=value"), the launcher's environment variables (read here, once), validation and the usage
// text. Every mistake is a UsageError naming the option.
#include <algorithm>
#include <cstdlib>

#include "deepshard/util/error.h"
#include "launch/launcher.h"
#include "util/environment.h"
#include "util/strings.h"

namespace deepshard::launch {
namespace {

const std::vector<std::string> kLongOptions = {
    "--nproc-per-node", "--nnodes",        "--node-rank",  "--master-addr",  "--master-port",
    "--grace",          "--no-thread-env", "--autotuning", "--memory-budget"};
const std::vector<std::string> kOptions = [] {
  std::vector<std::string> all = kLongOptions;
  all.push_back("-n");
  return all;
}();

int parse_int_option(const std::string& option, const std::string& text) {
  std::optional<int> value = strings::parse_int(text);
  DS_CHECK(value.has_value(), UsageError, option, " expects an integer, got '", text, "'");
  return *value;
}

double parse_seconds_option(const std::string& option, const std::string& text) {
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  DS_CHECK(!text.empty() && end == text.c_str() + text.size() && value >= 0, UsageError, option,
           " expects a number of seconds >= 0, got '", text, "'");
  return value;
}

// 8e9 or 8000000000 bytes.
int64_t parse_bytes_option(const std::string& option, const std::string& text) {
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  DS_CHECK(!text.empty() && end == text.c_str() + text.size() && value >= 1 && value < 9.2e18,
           UsageError, option, " expects a number of bytes >= 1 (8e9 is accepted), got '", text,
           "'");
  return static_cast<int64_t>(value);
}

// "--node_rank" -> "--node-rank"; "--nproc-per-node" -> "-n".
std::string canonical_name(std::string name) {
  for (size_t i = 2; i < name.size(); ++i) {
    if (name[i] == '_') name[i] = '-';
  }
  return name == "--nproc-per-node" ? "-n" : name;
}

}  // namespace

LaunchEnvironment launch_environment_from_process() {
  LaunchEnvironment e;
  e.job_token = util::non_empty_env("DEEPSHARD_JOB_TOKEN");
  e.slurm_job_id = util::non_empty_env("SLURM_JOB_ID");
  e.slurm_step_id = util::non_empty_env("SLURM_STEP_ID");
  e.openmpi_job_id = util::non_empty_env("OMPI_MCA_ess_base_jobid");
  e.socket_ifname = util::non_empty_env("GLOO_SOCKET_IFNAME");
  for (const char* name : {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "OMP_WAIT_POLICY"}) {
    if (util::non_empty_env(name)) e.thread_variables_set.emplace_back(name);
  }
  return e;
}

void validate_launch_options(const LaunchOptions& o) {
  DS_CHECK(o.nproc_per_node >= 1, UsageError, "-n (ranks per node) must be >= 1, got ",
           o.nproc_per_node);
  DS_CHECK(o.nnodes >= 1, UsageError, "--nnodes must be >= 1, got ", o.nnodes);
  DS_CHECK(o.node_rank >= 0 && o.node_rank < o.nnodes, UsageError,
           "--node-rank must be in [0, --nnodes), got ", o.node_rank, " with --nnodes ", o.nnodes);
  DS_CHECK(o.master_port >= 0 && o.master_port <= 65535, UsageError,
           "--master-port must be in [1, 65535] (0: pick a free port), got ", o.master_port);
  DS_CHECK(!o.master_addr.empty(), UsageError, "--master-addr must not be empty");
  const bool loopback =
      o.master_addr == "127.0.0.1" || o.master_addr == "localhost" || o.master_addr == "::1";
  DS_CHECK(o.nnodes == 1 || !loopback, UsageError, "--nnodes ", o.nnodes,
           " needs --master-addr: the address of node 0 that every node can reach (not ",
           o.master_addr, ")");
  DS_CHECK(o.grace_s >= 0, UsageError, "--grace must be >= 0 seconds, got ", o.grace_s);
  DS_CHECK(!o.command.empty(), UsageError, "no command after '--'");
  DS_CHECK(o.autotuning.empty() || o.autotuning == "tune" || o.autotuning == "run", UsageError,
           "--autotuning expects tune or run, got '", o.autotuning, "'");
  DS_CHECK(o.memory_budget == 0 || !o.autotuning.empty(), UsageError,
           "--memory-budget is the tuner's: give it with --autotuning tune|run");
  DS_CHECK(o.autotuning.empty() || o.nnodes == 1, UsageError,
           "--autotuning runs its experiments on this node only (--nnodes 1), got --nnodes ",
           o.nnodes);
}

LaunchOptions parse_launch_args(const std::vector<std::string>& args) {
  LaunchOptions o;
  o.environment = launch_environment_from_process();
  size_t i = 0;
  for (; i < args.size() && args[i] != "--"; ++i) {
    std::string name = args[i], value;
    bool has_inline_value = false;
    if (size_t eq = name.find('='); name.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_inline_value = true;
    }
    name = canonical_name(name);
    if (name == "--no-thread-env") {
      DS_CHECK(!has_inline_value, UsageError, "--no-thread-env takes no value");
      o.set_thread_env = false;
      continue;
    }
    DS_CHECK(name.size() > 1 && name[0] == '-', UsageError, "missing '--' before the command '",
             args[i], "'");
    if (std::find(kOptions.begin(), kOptions.end(), name) == kOptions.end()) {
      std::string hint = strings::closest_match(name, kLongOptions);
      throw UsageError(detail::concat("unknown option '", args[i], "'",
                                      hint.empty() ? "" : " (did you mean '" + hint + "'?)",
                                      "; the command to run goes after '--'"));
    }
    if (!has_inline_value) {
      DS_CHECK(i + 1 < args.size() && args[i + 1] != "--", UsageError, args[i], " expects a value");
      value = args[++i];
    }
    if (name == "-n") o.nproc_per_node = parse_int_option(name, value);
    if (name == "--nnodes") o.nnodes = parse_int_option(name, value);
    if (name == "--node-rank") o.node_rank = parse_int_option(name, value);
    if (name == "--master-addr") o.master_addr = value;
    if (name == "--master-port") o.master_port = parse_int_option(name, value);
    if (name == "--grace") o.grace_s = parse_seconds_option(name, value);
    if (name == "--autotuning") o.autotuning = value;
    if (name == "--memory-budget") o.memory_budget = parse_bytes_option(name, value);
  }
  DS_CHECK(i < args.size(), UsageError, "missing '--' before the command to run");
  o.command.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
  validate_launch_options(o);
  return o;
}

bool launch_help_requested(const std::vector<std::string>& args) {
  const auto options_end = std::find(args.begin(), args.end(), "--");
  return std::any_of(args.begin(), options_end,
                     [](const std::string& a) { return a == "--help" || a == "-h"; });
}

std::string launch_usage() {
  return R"(usage: deepshard launch -n N [OPTIONS] -- COMMAND [ARGS...]

Starts N ranks of COMMAND on this node with torchrun's environment (MASTER_ADDR, MASTER_PORT,
RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK). Each output line is printed with a
"[rank R] " prefix. SIGINT/SIGTERM are forwarded to every rank (if they all exit 0, as
`deepshard train` does after saving a checkpoint on SIGTERM, so does the launcher; otherwise it
exits with 128 + the signal). When a rank exits non-zero the
others are stopped (SIGTERM, then SIGKILL after the grace period) and the launcher exits with
that rank's status, after printing its last lines to stderr.

options:
  -n, --nproc-per-node N  ranks on this node (>= 1)
  --nnodes K              nodes in the job (default 1); run one launcher per node
  --node-rank I           this node's index in [0, K) (default 0); RANK = I * N + LOCAL_RANK
  --master-addr A         address of node 0, where rank 0 hosts the store (default 127.0.0.1)
  --master-port P         port of the store (default: a free port on one node, 29500 on several)
  --grace S               seconds between SIGTERM and SIGKILL when stopping ranks (default 10)
  --autotuning tune|run   search the command's config (a `deepshard train` job: its `autotuning`
                          section) with short real runs on these ranks, write the best as
                          ds_config_optimal.json in results_dir; run: then train with it
                          (docs/autotuning.md)
  --memory-budget BYTES   with --autotuning: memory per rank an experiment may use (8e9 accepted;
                          default: the memory available at the start / N); configurations the
                          estimate puts above it are pruned, a run that exceeds it is stopped
  --no-thread-env         do not set OMP_NUM_THREADS / OPENBLAS_NUM_THREADS (cores / N) and
                          OMP_WAIT_POLICY=PASSIVE; by default each is set unless already set
  -h, --help              this text

Each job has a token (DEEPSHARD_JOB_TOKEN, random unless set): the ranks present it to the
rendezvous store, which refuses any other process. With --nnodes > 1 set DEEPSHARD_JOB_TOKEN to the
same secret on every node (launchers started by srun or mpirun use their job's id when it is not
set). The store listens on --master-addr only (loopback by default). With --nnodes > 1 each
launcher prints its node's address (the one that routes to --master-addr, which Gloo uses unless
GLOO_SOCKET_IFNAME names an interface) and its rank range.
)";
}

}  // namespace deepshard::launch
