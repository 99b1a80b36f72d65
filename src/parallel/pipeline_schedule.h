// The 1F1B pipeline schedule (PipeDream-Flush, Narayanan et al. 2021; DeepSpeed's TrainSchedule
// and Megatron-LM's non-interleaved schedule): over M micro-batches, stage s of S first runs
// min(S - s - 1, M) warm-up forwards, then alternates one forward and one backward (steady
// state), then runs the remaining backwards (cool-down). At most S - s micro-batches are in
// flight on stage s (their activations kept), instead of M with all forwards first (GPipe).
// Micro-batches leave every stage in order, forwards and backwards alike, so each neighbour link
// carries activations in micro-batch order and gradients in micro-batch order.
// Pure arithmetic, no torch.
#pragma once

#include <string>
#include <vector>

namespace deepshard::parallel {

struct PipeStep {
  enum Kind { kForward, kBackward };
  Kind kind;
  int micro;  // 0-based micro-batch index
  bool operator==(const PipeStep&) const = default;
};

// Stage `stage`'s steps over `micro_batches` micro-batches of a pipeline of `stages` stages.
// REQUIRES: 0 <= stage < stages, micro_batches >= 1.
std::vector<PipeStep> one_f_one_b(int stages, int stage, int micro_batches);

// The idle share of a flushed pipeline's time, (S - 1) / (M + S - 1) (forward and backward of a
// micro-batch taking the same time on every stage).
double bubble_fraction(int stages, int micro_batches);

// "F0 F1 B0 F2 B1 B2" (tests and logs).
std::string describe(const std::vector<PipeStep>& steps);

}  // namespace deepshard::parallel
