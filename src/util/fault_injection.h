// Faults that tests inject into the library: an interface the library calls at a few points and a
// process-wide slot for it, empty in production. Only test executables install one
// (tests/workers/fault_main.cpp, which reads its settings from the environment: test code does,
// the library never does), so every fault is visible in the code as a call to this interface.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace deepshard::testing {

class FaultInjection {
 public:
  virtual ~FaultInjection() = default;
  // Engines, at optimizer step `step` (1-based) on rank `rank`: true makes the rank's reduced
  // gradients overflow (+inf in their first element) before the overflow check.
  virtual bool gradient_overflow(int64_t step, int rank) { return false; }
  // Checkpoints: on each rank after its records are built, before it writes its shard file of
  // checkpoint `tag` (sleep to widen a race, kill the process, ...).
  virtual void before_shard_write(int rank, const std::string& tag) {}
  // The trainer: at the start of step `step` (1-based) on each rank; throw to fail the rank.
  virtual void at_train_step(int64_t step, int rank) {}
  // The trainer: after optimizer step `step` on each rank, what that rank's engine did (a probe:
  // tests record every rank's skipped steps and loss scales, not only rank 0's metrics).
  virtual void after_train_step(int64_t step, int rank, bool skipped, double loss_scale) {}
  // The autotuner: a resident-memory limit for experiment `name` in place of the budget (a tiny
  // one forces the experiment out of memory); none keeps the budget.
  virtual std::optional<int64_t> trial_memory_limit(const std::string& name) { return std::nullopt; }
};

// Installs `faults` for the whole process (nullptr: none).
void install_fault_injection(std::shared_ptr<FaultInjection> faults);
// The installed faults, or nullptr (always, outside tests).
FaultInjection* fault_injection();

}  // namespace deepshard::testing
