// The 1F1B schedule's step order and the bubble fraction (pipeline_schedule.h).
#include "parallel/pipeline_schedule.h"

#include <algorithm>
#include <sstream>

#include "deepshard/util/error.h"

namespace deepshard::parallel {

std::vector<PipeStep> one_f_one_b(int stages, int stage, int micro_batches) {
  DS_ASSERT(stages >= 1 && stage >= 0 && stage < stages && micro_batches >= 1, "one_f_one_b(",
            stages, ", ", stage, ", ", micro_batches, ")");
  const int warmup = std::min(stages - stage - 1, micro_batches);
  std::vector<PipeStep> steps;
  int forward = 0, backward = 0;
  for (; forward < warmup; ++forward) steps.push_back({PipeStep::kForward, forward});
  for (; forward < micro_batches; ++forward, ++backward) {
    steps.push_back({PipeStep::kForward, forward});
    steps.push_back({PipeStep::kBackward, backward});
  }
  for (; backward < micro_batches; ++backward) steps.push_back({PipeStep::kBackward, backward});
  return steps;
}

double bubble_fraction(int stages, int micro_batches) {
  return static_cast<double>(stages - 1) / static_cast<double>(micro_batches + stages - 1);
}

std::string describe(const std::vector<PipeStep>& steps) {
  std::ostringstream os;
  for (size_t i = 0; i < steps.size(); ++i) {
    os << (i ? " " : "") << (steps[i].kind == PipeStep::kForward ? "F" : "B") << steps[i].micro;
  }
  return os.str();
}

}  // namespace deepshard::parallel
