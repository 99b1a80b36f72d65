// deepshard_faults: the deepshard executable with faults injected for tests (the library's
// testing::FaultInjection, src/util/fault_injection.h). The faults come from the environment,
// read here, in test code, never in the library:
//   DEEPSHARD_TEST_INF_AT_STEP=S [DEEPSHARD_TEST_INF_RANK=R, default 0]: rank R's reduced
//     gradients overflow (+inf) at optimizer step S; R is the rank in the engine's group (the
//     data-parallel group with model parallelism), or with DEEPSHARD_TEST_INF_WORLD_RANK=W the
//     process whose RANK is W (one tensor rank or one pipeline stage);
//   DEEPSHARD_TEST_STEP_LOG=PREFIX: every rank appends "step skipped loss_scale" per optimizer
//     step to PREFIX.rank<R> (R: its rank in the job);
//   DEEPSHARD_TEST_FAIL_AT_STEP=S [DEEPSHARD_TEST_FAIL_RANK=R, default 0]: rank R throws at the
//     start of training step S;
//   DEEPSHARD_TEST_KILL_AT_STEP=S [DEEPSHARD_TEST_FAIL_RANK=R, default 0]: rank R kills itself
//     (SIGKILL) at the start of training step S (a dead rank: no error message of its own);
//   DEEPSHARD_TEST_SAVE_DELAY_MS=T: every rank sleeps T ms before writing its checkpoint shard;
//   DEEPSHARD_TEST_SAVE_KILL=R:TAG: rank R kills itself (SIGKILL) while saving checkpoint TAG;
//   DEEPSHARD_TEST_SWAP_WRITE_FAIL=N:R: every swap-file write after the first N of the process
//     whose RANK is R fails with ENOSPC, as a disk that filled up mid-run (io's fault hook);
//   DEEPSHARD_TEST_TRIAL_MEMORY_LIMIT=NAME=BYTES[,NAME=BYTES...]: `launch --autotuning` gives
//     those experiments that resident-memory limit instead of the budget (a tiny one forces the
//     experiment out of memory).
#include <signal.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "cli/commands.h"
#include "deepshard/util/error.h"
#include "io/aio_options.h"
#include "util/fault_injection.h"

namespace deepshard::testing {
namespace {

std::optional<int64_t> env_int(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::atoll(v);
}

class EnvFaults : public FaultInjection {
 public:
  bool gradient_overflow(int64_t step, int rank) override {
    if (!inf_at_ || *inf_at_ != step) return false;
    if (inf_world_rank_) return *inf_world_rank_ == env_int("RANK").value_or(0);
    return inf_rank_ == rank;
  }
  void after_train_step(int64_t step, int rank, bool skipped, double loss_scale) override {
    const char* prefix = std::getenv("DEEPSHARD_TEST_STEP_LOG");
    if (prefix == nullptr) return;
    std::ofstream out(std::string(prefix) + ".rank" + std::to_string(rank), std::ios::app);
    out << step << ' ' << (skipped ? 1 : 0) << ' ' << loss_scale << '\n';
  }
  void before_shard_write(int rank, const std::string& tag) override {
    if (save_delay_ms_) std::this_thread::sleep_for(std::chrono::milliseconds(*save_delay_ms_));
    if (const char* kill = std::getenv("DEEPSHARD_TEST_SAVE_KILL")) {
      const std::string spec = kill;
      const size_t colon = spec.find(':');
      if (colon != std::string::npos && std::atoi(spec.c_str()) == rank &&
          spec.substr(colon + 1) == tag)
        ::raise(SIGKILL);
    }
  }
  std::optional<int64_t> trial_memory_limit(const std::string& name) override {
    const char* spec = std::getenv("DEEPSHARD_TEST_TRIAL_MEMORY_LIMIT");
    std::string rest = spec != nullptr ? spec : "";
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      const std::string item = rest.substr(0, comma);
      rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
      const size_t eq = item.find('=');
      if (eq != std::string::npos && item.substr(0, eq) == name)
        return std::atoll(item.c_str() + eq + 1);
    }
    return std::nullopt;
  }
  void at_train_step(int64_t step, int rank) override {
    if (kill_at_ && *kill_at_ == step && fail_rank_ == rank) ::raise(SIGKILL);
    if (fail_at_ && *fail_at_ == step && fail_rank_ == rank)
      throw Error("injected failure at step " + std::to_string(step) +
                  " (DEEPSHARD_TEST_FAIL_AT_STEP)");
  }

 private:
  std::optional<int64_t> inf_at_ = env_int("DEEPSHARD_TEST_INF_AT_STEP");
  int64_t inf_rank_ = env_int("DEEPSHARD_TEST_INF_RANK").value_or(0);
  std::optional<int64_t> inf_world_rank_ = env_int("DEEPSHARD_TEST_INF_WORLD_RANK");
  std::optional<int64_t> fail_at_ = env_int("DEEPSHARD_TEST_FAIL_AT_STEP");
  int64_t fail_rank_ = env_int("DEEPSHARD_TEST_FAIL_RANK").value_or(0);
  std::optional<int64_t> kill_at_ = env_int("DEEPSHARD_TEST_KILL_AT_STEP");
  std::optional<int64_t> save_delay_ms_ = env_int("DEEPSHARD_TEST_SAVE_DELAY_MS");
};

void install_swap_write_fault() {
  const char* spec = std::getenv("DEEPSHARD_TEST_SWAP_WRITE_FAIL");
  if (spec == nullptr) return;
  long long after = 0;
  int who = 0;
  if (std::sscanf(spec, "%lld:%d", &after, &who) != 2 || who != env_int("RANK").value_or(0)) return;
  auto writes = std::make_shared<std::atomic<long long>>(0);
  io::set_process_fault_hook([writes, after](io::IoOp op, const std::string&, int64_t) {
    return op == io::IoOp::kWrite && ++*writes > after ? ENOSPC : 0;
  });
}

}  // namespace
}  // namespace deepshard::testing

int main(int argc, char** argv) {
  deepshard::testing::install_fault_injection(std::make_shared<deepshard::testing::EnvFaults>());
  deepshard::testing::install_swap_write_fault();
  return deepshard::cli::run_cli(argc, argv);
}
