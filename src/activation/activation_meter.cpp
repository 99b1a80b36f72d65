// ActivationMeter (see activation_meter.h): a c10::MemoryReportingInfoBase installed as the
// thread's PROFILER_STATE debug info, so that c10's ProfiledCPUMemoryReporter forwards every host
// allocation (size > 0) and free (size < 0) to it.
#include "activation/activation_meter.h"

#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>

#include <algorithm>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace deepshard::activation {

struct ActivationMeter::Impl : public c10::MemoryReportingInfoBase {
  ActivationMeter* owner = nullptr;
  mutable std::mutex mu;
  int depth = 0;
  struct Allocation {
    int64_t bytes, seq;
  };
  std::unordered_map<void*, Allocation> live;  // activation allocations not freed yet
  int64_t live_bytes = 0, kept_peak = 0, transient_peak = 0;
  // For finish_step: every window-end sample and the transient peak, with the allocation count at
  // that moment (the allocations made before it are the ones it includes).
  int64_t seq = 0;
  struct Sample {
    int64_t bytes, seq;
  };
  std::vector<Sample> samples;
  Sample transient_sample{0, 0};

  void reportMemoryUsage(void* ptr, int64_t alloc_size, int64_t, int64_t, c10::Device) override {
    std::lock_guard<std::mutex> lock(mu);
    if (alloc_size > 0) {
      if (depth == 0) return;
      live[ptr] = {alloc_size, ++seq};
      live_bytes += alloc_size;
      if (live_bytes > transient_peak) {
        transient_peak = live_bytes;
        transient_sample = {live_bytes, seq};
      }
    } else if (alloc_size < 0) {
      auto it = live.find(ptr);
      if (it == live.end()) return;
      live_bytes -= it->second.bytes;
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
  if (impl_->depth > 0 && --impl_->depth == 0) {
    impl_->kept_peak = std::max(impl_->kept_peak, impl_->live_bytes);
    impl_->samples.push_back({impl_->live_bytes, impl_->seq});
  }
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

void ActivationMeter::reset_peaks() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->kept_peak = impl_->live_bytes;
  impl_->transient_peak = impl_->live_bytes;
  impl_->samples.clear();
  impl_->transient_sample = {impl_->live_bytes, impl_->seq};
}

ActivationMeter::StepPeaks ActivationMeter::finish_step() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  // What is still alive was allocated in a window but outlived the backward: not an activation
  // (a buffer kept by a layer, the loss the caller holds). Each sample loses the survivors it
  // included, those allocated before it.
  std::vector<Impl::Allocation> survivors;
  for (const auto& [ptr, a] : impl_->live) survivors.push_back(a);
  auto without_survivors = [&](const Impl::Sample& s) {
    int64_t bytes = s.bytes;
    for (const auto& a : survivors)
      if (a.seq <= s.seq) bytes -= a.bytes;
    return bytes;
  };
  StepPeaks out;
  for (const auto& s : impl_->samples) out.kept = std::max(out.kept, without_survivors(s));
  out.transient = std::max(out.kept, without_survivors(impl_->transient_sample));
  impl_->live.clear();
  impl_->live_bytes = 0;
  impl_->kept_peak = impl_->transient_peak = 0;
  impl_->samples.clear();
  impl_->transient_sample = {0, impl_->seq};
  return out;
}

ActivationMeter* ActivationMeter::on_this_thread() {
  auto* info = c10::ThreadLocalDebugInfo::get(c10::DebugInfoKind::PROFILER_STATE);
  auto* impl = dynamic_cast<Impl*>(info);
  return impl != nullptr ? impl->owner : nullptr;
}

}  // namespace deepshard::activation
