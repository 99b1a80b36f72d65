// The process-wide fault-injection slot (see fault_injection.h).
#include "util/fault_injection.h"

namespace deepshard::testing {
namespace {

std::shared_ptr<FaultInjection>& slot() {
  static std::shared_ptr<FaultInjection> faults;
  return faults;
}

}  // namespace

void install_fault_injection(std::shared_ptr<FaultInjection> faults) { slot() = std::move(faults); }

FaultInjection* fault_injection() { return slot().get(); }

}  // namespace deepshard::testing
