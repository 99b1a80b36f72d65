// ActivationMeter (see activation_meter.h): a c10::MemoryReportingInfoBase installed as the
// thread's PROFILER_STATE debug info, so that c10's ProfiledCPUMemoryReporter forwards every host
// allocation (size > 0) and free (size < 0) to it.
#include "deepshard/activation/activation_meter.h"

#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>

#include <algorithm>
#include <mutex>
#include <unordered_map>

namespace deepshard::activation {

struct ActivationMeter::Impl : public c10::MemoryReportingInfoBase {
  ActivationMeter* owner = nullptr;
  mutable std::mutex mu;
  int depth = 0;
  std::unordered_map<void*, int64_t> live;  // activation allocations not freed yet
  int64_t live_bytes = 0, kept_peak = 0, transient_peak = 0;

  void reportMemoryUsage(void* ptr, int64_t alloc_size, int64_t, int64_t, c10::Device) override {
    std::lock_guard<std::mutex> lock(mu);
    if (alloc_size > 0) {
      if (depth == 0) return;
      live[ptr] = alloc_size;
      live_bytes += alloc_size;
      transient_peak = std::max(transient_peak, live_bytes);
    } else if (alloc_size < 0) {
      auto it = live.find(ptr);
      if (it == live.end()) return;
      live_bytes -= it->second;
      live.erase(it);
    }
  }
  bool memoryProfilingEnabled() const override { return true; }
};

struct ActivationMeter::Scope::Guard {
  explicit Guard(std::shared_ptr<c10::DebugInfoBase> info)
      : guard(c10::DebugInfoKind::PROFILER_STATE, std::move(info)) {}
  c10::DebugInfoGuard guard;
};

ActivationMeter::ActivationMeter() : impl_(std::make_shared<Impl>()) { impl_->owner = this; }
ActivationMeter::~ActivationMeter() { impl_->owner = nullptr; }

ActivationMeter::Scope::Scope(ActivationMeter& meter)
    : guard_(std::make_unique<Guard>(meter.impl_)) {}
ActivationMeter::Scope::~Scope() = default;

void ActivationMeter::begin_window() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  ++impl_->depth;
}

void ActivationMeter::end_window() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->depth > 0 && --impl_->depth == 0)
    impl_->kept_peak = std::max(impl_->kept_peak, impl_->live_bytes);
}

int64_t ActivationMeter::live_bytes() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->live_bytes;
}

int64_t ActivationMeter::kept_peak_bytes() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->kept_peak;
}

int64_t ActivationMeter::transient_peak_bytes() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->transient_peak;
}

void ActivationMeter::reset_peaks(bool forget) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (forget) {
    impl_->live.clear();
    impl_->live_bytes = 0;
  }
  impl_->kept_peak = impl_->live_bytes;
  impl_->transient_peak = impl_->live_bytes;
}

ActivationMeter* ActivationMeter::on_this_thread() {
  auto* info = c10::ThreadLocalDebugInfo::get(c10::DebugInfoKind::PROFILER_STATE);
  auto* impl = dynamic_cast<Impl*>(info);
  return impl != nullptr ? impl->owner : nullptr;
}

}  // namespace deepshard::activation
