// The state of every random generator a checkpointed region may draw from (the host's default
// generator, and the default generator of each accelerator its inputs live on), captured before
// the region's forward and put back for its recompute, so dropout draws the same masks twice.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <utility>
#include <vector>

namespace deepshard::activation {

class RngSnapshot {
 public:
  // The generators for a region whose inputs are `inputs`, with their current states.
  static RngSnapshot capture(const std::vector<at::Tensor>& inputs);
  // The same generators with their current states (to put back after a recompute).
  RngSnapshot recapture() const;
  void restore() const;

 private:
  std::vector<std::pair<at::Generator, at::Tensor>> states_;
};

// Restores `snapshot` for the lifetime of the object, then puts the generators back as they were
// (the recompute must not disturb the draws of whatever runs after it).
class RngSwap {
 public:
  explicit RngSwap(const RngSnapshot& snapshot) : current_(snapshot.recapture()) {
    snapshot.restore();
  }
  ~RngSwap() { current_.restore(); }
  RngSwap(const RngSwap&) = delete;
  RngSwap& operator=(const RngSwap&) = delete;

 private:
  RngSnapshot current_;
};

}  // namespace deepshard::activation
