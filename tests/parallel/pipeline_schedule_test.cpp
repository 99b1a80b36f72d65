// The 1F1B schedule (pipeline_schedule.h): its order on every stage, the activations it keeps,
// that the stages together finish (each link's channels carry micro-batches in order, receives
// block) and that its length in time is what the bubble fraction says.
#include "parallel/pipeline_schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

namespace deepshard::parallel {
namespace pipeline_schedule_test {

TEST(OneFOneB, WarmUpSteadyCoolDown) {
  EXPECT_EQ(describe(one_f_one_b(4, 0, 6)), "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
  EXPECT_EQ(describe(one_f_one_b(4, 2, 6)), "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5");
  EXPECT_EQ(describe(one_f_one_b(4, 3, 6)), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5");
  // Fewer micro-batches than stages: all forwards, then all backwards.
  EXPECT_EQ(describe(one_f_one_b(4, 0, 2)), "F0 F1 B0 B1");
  EXPECT_EQ(describe(one_f_one_b(1, 0, 3)), "F0 B0 F1 B1 F2 B2");
}

TEST(OneFOneB, EveryMicroBatchOnceForwardBeforeBackwardAtMostStagesMinusSInFlight) {
  for (int stages = 1; stages <= 6; ++stages) {
    for (int micro = 1; micro <= 9; ++micro) {
      for (int s = 0; s < stages; ++s) {
        const auto steps = one_f_one_b(stages, s, micro);
        const std::string where = "S=" + std::to_string(stages) + " M=" + std::to_string(micro) +
                                  " s=" + std::to_string(s) + ": " + describe(steps);
        ASSERT_EQ(steps.size(), size_t(2 * micro)) << where;
        int next_f = 0, next_b = 0, in_flight = 0, most = 0;
        for (const PipeStep& step : steps) {
          if (step.kind == PipeStep::kForward) {
            ASSERT_EQ(step.micro, next_f++) << where;  // forwards in order
            most = std::max(most, ++in_flight);
          } else {
            ASSERT_EQ(step.micro, next_b++) << where;  // backwards in order
            ASSERT_LT(step.micro, next_f) << where;    // after its forward
            --in_flight;
          }
        }
        EXPECT_EQ(next_f, micro) << where;
        EXPECT_EQ(next_b, micro) << where;
        EXPECT_LE(most, stages - s) << where;
        EXPECT_EQ(most, std::min(stages - s, micro)) << where;
      }
    }
  }
}

// All stages together, as the engine runs them: a forward on stage s > 0 waits for that
// micro-batch's activation from s - 1, a backward on s < S - 1 for its gradient from s + 1; sends
// never wait. With forward and backward taking one unit of time each, every stage finishes, and
// the whole batch takes 2 (M + S - 1) units: the busy share is 2M of them, the idle share
// (S - 1) / (M + S - 1), the bubble fraction.
TEST(OneFOneB, StagesTogetherFinishInTheTimeTheBubbleFractionSays) {
  for (int stages = 1; stages <= 6; ++stages) {
    for (int micro = 1; micro <= 9; ++micro) {
      std::vector<std::vector<PipeStep>> plan;
      for (int s = 0; s < stages; ++s) plan.push_back(one_f_one_b(stages, s, micro));
      std::map<std::tuple<int, int, int>, int> done;  // (kind, stage, micro) -> end time
      std::vector<size_t> next(stages, 0);
      std::vector<int> free_at(stages, 0);
      bool progress = true;
      while (progress) {
        progress = false;
        for (int s = 0; s < stages; ++s) {
          if (next[s] == plan[s].size()) continue;
          const PipeStep step = plan[s][next[s]];
          int ready = free_at[s];
          const bool forward = step.kind == PipeStep::kForward;
          if (forward ? s > 0 : s < stages - 1) {
            auto dep = done.find({step.kind, forward ? s - 1 : s + 1, step.micro});
            if (dep == done.end()) continue;  // a blocking receive
            ready = std::max(ready, dep->second);
          }
          free_at[s] = ready + 1;
          done[{step.kind, s, step.micro}] = free_at[s];
          ++next[s];
          progress = true;
        }
      }
      const std::string where = "S=" + std::to_string(stages) + " M=" + std::to_string(micro);
      for (int s = 0; s < stages; ++s) ASSERT_EQ(next[s], plan[s].size()) << where << " stuck";
      const int makespan = *std::max_element(free_at.begin(), free_at.end());
      EXPECT_EQ(makespan, 2 * (micro + stages - 1)) << where;
      EXPECT_DOUBLE_EQ(1.0 - 2.0 * micro / makespan, bubble_fraction(stages, micro)) << where;
    }
  }
}

}  // namespace pipeline_schedule_test
}  // namespace deepshard::parallel
