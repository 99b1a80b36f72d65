// RngSnapshot (see rng_state.h): generator states through at::Generator's get_state/set_state,
// under each generator's own mutex.
#include "activation/rng_state.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>

#include <mutex>

namespace deepshard::activation {
namespace {

at::Tensor state_of(at::Generator& gen) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

}  // namespace

RngSnapshot RngSnapshot::capture(const std::vector<at::Tensor>& inputs) {
  RngSnapshot s;
  at::Generator host = at::detail::getDefaultCPUGenerator();
  s.states_.emplace_back(host, state_of(host));
  std::vector<at::Device> devices;
  for (const at::Tensor& t : inputs) {
    if (!t.defined() || t.device().is_cpu()) continue;
    bool seen = false;
    for (const auto& d : devices) seen = seen || d == t.device();
    if (seen) continue;
    devices.push_back(t.device());
    at::Generator gen = at::globalContext().defaultGenerator(t.device());
    s.states_.emplace_back(gen, state_of(gen));
  }
  return s;
}

RngSnapshot RngSnapshot::recapture() const {
  RngSnapshot s;
  for (const auto& [gen, state] : states_) {
    at::Generator g = gen;
    s.states_.emplace_back(g, state_of(g));
  }
  return s;
}

void RngSnapshot::restore() const {
  for (const auto& [gen, state] : states_) {
    at::Generator g = gen;
    std::lock_guard<std::mutex> lock(g.mutex());
    g.set_state(state);
  }
}

}  // namespace deepshard::activation
