// DeepSpeed's LR schedules against values computed by hand from lr_schedules.py. lr(t) is the rate
// of optimizer step t, i.e. DeepSpeed's get_lr() at last_batch_iteration = t - 1 (-1 at step 0).
#include "optim/lr_schedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "deepshard/util/error.h"

namespace deepshard::optim {
namespace lr_schedule_test {

constexpr double kTol = 1e-12;

config::OptimizerConfig optimizer(double lr) {
  config::OptimizerConfig c;
  c.lr = lr;
  return c;
}

config::SchedulerConfig scheduler(const std::string& type) {
  config::SchedulerConfig s;
  s.type = type;
  return s;
}

// The ConfigError message of create(), or "" when it does not throw.
std::string create_error(const config::SchedulerConfig& s) {
  try {
    LrSchedule::create(s, optimizer(0.1));
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(LrSchedule, NoneIsTheOptimizerLr) {
  auto lr = LrSchedule::create(scheduler(""), optimizer(0.5));
  EXPECT_EQ(lr->lr(0), 0.5);
  EXPECT_EQ(lr->lr(100'000), 0.5);
  EXPECT_FALSE(lr->beta1(3).has_value());
}

TEST(LrSchedule, WarmupLrLog) {
  auto s = scheduler("WarmupLR");
  s.warmup_min_lr = 0.0;
  s.warmup_max_lr = 0.01;
  s.warmup_num_steps = 10;
  auto lr = LrSchedule::create(s, optimizer(0.5));
  EXPECT_NEAR(lr->lr(0), 0.0, kTol);                         // construction: min
  EXPECT_NEAR(lr->lr(1), 0.0, kTol);                         // it 0: ln 1 / ln 10 = 0
  EXPECT_NEAR(lr->lr(2), 0.01 * 0.30102999566398120, kTol);  // it 1: ln 2 / ln 10
  EXPECT_NEAR(lr->lr(10), 0.01, kTol);  // it 9, the last warmup step: ln 10 / ln 10
  EXPECT_NEAR(lr->lr(11), 0.01, kTol);
  EXPECT_NEAR(lr->lr(5000), 0.01, kTol);
}

TEST(LrSchedule, WarmupLrLinearAndMaxFromOptimizer) {
  auto s = scheduler("WarmupLR");
  s.warmup_min_lr = 0.001;
  s.warmup_num_steps = 10;
  s.warmup_type = "linear";
  auto lr = LrSchedule::create(s, optimizer(0.011));  // max absent: the optimizer's lr
  EXPECT_NEAR(lr->lr(0), 0.001, kTol);
  EXPECT_NEAR(lr->lr(1), 0.001, kTol);   // it 0: 0 / 10
  EXPECT_NEAR(lr->lr(6), 0.006, kTol);   // it 5: 0.001 + 0.010 * 0.5
  EXPECT_NEAR(lr->lr(10), 0.010, kTol);  // it 9: 0.9
  EXPECT_NEAR(lr->lr(11), 0.011, kTol);  // it 10: warmup over
  EXPECT_NEAR(lr->lr(999), 0.011, kTol);
}

TEST(LrSchedule, WarmupLrClampsWarmupStepsToTwo) {
  auto s = scheduler("WarmupLR");
  s.warmup_min_lr = 0.0;
  s.warmup_max_lr = 1.0;
  s.warmup_num_steps = 1;
  s.warmup_type = "linear";
  auto lr = LrSchedule::create(s, optimizer(0.5));
  EXPECT_NEAR(lr->lr(1), 0.0, kTol);  // it 0: 0 / 2
  EXPECT_NEAR(lr->lr(2), 0.5, kTol);  // it 1: 1 / 2 (with N = 1 this would already be 1)
  EXPECT_NEAR(lr->lr(3), 1.0, kTol);
  s.warmup_num_steps = 0;
  EXPECT_NE(create_error(s).find("scheduler.params.warmup_num_steps"), std::string::npos);
}

TEST(LrSchedule, WarmupDecayLr) {
  auto s = scheduler("WarmupDecayLR");
  s.total_num_steps = 20;
  s.warmup_num_steps = 10;
  s.warmup_type = "linear";
  auto lr = LrSchedule::create(s, optimizer(0.5));  // max absent: 0.001, not the optimizer's lr
  EXPECT_NEAR(lr->lr(0), 0.0, kTol);
  EXPECT_NEAR(lr->lr(6), 0.0005, kTol);   // it 5: warmup 0.5
  EXPECT_NEAR(lr->lr(11), 0.001, kTol);   // it 10: (20 - 10) / 10
  EXPECT_NEAR(lr->lr(16), 0.0005, kTol);  // it 15: 5 / 10
  EXPECT_NEAR(lr->lr(21), 0.0, kTol);     // it 20: total reached
  EXPECT_NEAR(lr->lr(30), 0.0, kTol);     // past the total: clamped at 0
}

TEST(LrSchedule, WarmupDecayLrRequiresTotalSteps) {
  auto s = scheduler("WarmupDecayLR");
  EXPECT_NE(create_error(s).find("scheduler.params.total_num_steps"), std::string::npos);
}

TEST(LrSchedule, WarmupCosineLr) {
  auto s = scheduler("WarmupCosineLR");
  s.total_num_steps = 20;
  s.warmup_num_steps = 10;
  s.warmup_min_ratio = 0.1;
  s.cos_min_ratio = 0.01;
  s.warmup_type = "linear";
  auto lr = LrSchedule::create(s, optimizer(0.1));
  EXPECT_NEAR(lr->lr(0), 0.0, kTol);     // DeepSpeed's ratio before the first step is 0
  EXPECT_NEAR(lr->lr(1), 0.01, kTol);    // it 0: ratio 0.1
  EXPECT_NEAR(lr->lr(6), 0.055, kTol);   // it 5: 0.1 + 0.5 * 0.9
  EXPECT_NEAR(lr->lr(10), 0.091, kTol);  // it 9: 0.1 + 0.9 * 0.9, the end of warmup
  // it 10: p = 1/10; ratio = 0.01 + 0.99 * (1 + cos(0.1 pi)) / 2 = 0.975773...
  EXPECT_NEAR(lr->lr(11), 0.1 * (0.01 + 0.99 * (1 + 0.95105651629515357) / 2), kTol);
  EXPECT_NEAR(lr->lr(15), 0.0505, kTol);  // it 14: p = 1/2, cos = 0
  EXPECT_NEAR(lr->lr(20), 0.001, kTol);   // it 19: p = 1, the floor
  EXPECT_NEAR(lr->lr(40), 0.001, kTol);   // past the total: stays at the floor
  EXPECT_NE(create_error(scheduler("WarmupCosineLR")).find("scheduler.params.total_num_steps"),
            std::string::npos);
}

config::SchedulerConfig one_cycle() {
  auto s = scheduler("OneCycle");
  s.cycle_min_lr = 0.01;
  s.cycle_max_lr = 0.1;
  s.cycle_first_step_size = 4;
  s.cycle_second_step_size = 6;
  s.decay_lr_rate = 0.5;
  s.decay_step_size = 2;
  s.cycle_min_mom = 0.8;
  s.cycle_max_mom = 0.9;
  return s;
}

TEST(LrSchedule, OneCycleLrAndMomentum) {
  auto lr = LrSchedule::create(one_cycle(), optimizer(0.5));
  EXPECT_NEAR(lr->lr(0), 0.01, kTol);
  EXPECT_NEAR(lr->lr(2), 0.055, kTol);   // rising: x 0.2 / ratio 0.4 = 0.5
  EXPECT_NEAR(lr->lr(4), 0.1, kTol);     // the peak
  EXPECT_NEAR(lr->lr(7), 0.055, kTol);   // falling: (0.7 - 1) / (0.4 - 1) = 0.5
  EXPECT_NEAR(lr->lr(10), 0.01, kTol);   // the end of the cycle
  EXPECT_NEAR(lr->lr(11), 0.008, kTol);  // decay: 0.01 / (1 + 0.5 * 1/2)
  EXPECT_NEAR(lr->lr(14), 0.005, kTol);  // 0.01 / (1 + 0.5 * 4/2)
  // Momentum: DeepSpeed's constructor sets the minimum, then it moves against the lr.
  EXPECT_NEAR(*lr->beta1(0), 0.8, kTol);
  EXPECT_NEAR(*lr->beta1(2), 0.85, kTol);
  EXPECT_NEAR(*lr->beta1(4), 0.8, kTol);
  EXPECT_NEAR(*lr->beta1(10), 0.9, kTol);
  EXPECT_NEAR(*lr->beta1(14), 0.9, kTol);  // decay_mom_rate 0: stays at the maximum
  EXPECT_NEAR(*lr->beta2(3), 0.99, kTol);
}

TEST(LrSchedule, OneCycleStairsAndMomentumDecay) {
  auto s = one_cycle();
  s.cycle_first_stair_count = 2;
  s.cycle_second_stair_count = 3;
  s.decay_mom_rate = 0.1;
  auto lr = LrSchedule::create(s, optimizer(0.5));
  EXPECT_NEAR(lr->lr(1), 0.01, kTol);   // floor(1 * 2 / 4) / 2 = 0
  EXPECT_NEAR(lr->lr(3), 0.055, kTol);  // floor(3 * 2 / 4) / 2 = 0.5
  EXPECT_NEAR(lr->lr(4), 0.1, kTol);
  EXPECT_NEAR(lr->lr(5), 0.07, kTol);  // floor((10 - 5) * 3 / 6) / 3 = 2/3
  EXPECT_NEAR(lr->lr(8), 0.04, kTol);  // floor(2 * 3 / 6) / 3 = 1/3
  EXPECT_NEAR(*lr->beta1(14), 0.9 * (1 + 0.1 * 2), kTol);
}

TEST(LrSchedule, OneCycleSecondStairCountDefaultsToTheFirst) {
  auto s = one_cycle();
  s.cycle_first_stair_count = 2;  // cycle_second_stair_count absent: 2 as well (DeepSpeed)
  auto lr = LrSchedule::create(s, optimizer(0.5));
  EXPECT_NEAR(lr->lr(5), 0.055, kTol);  // floor((10 - 5) * 2 / 6) / 2 = 0.5
  EXPECT_NEAR(lr->lr(8), 0.01, kTol);   // floor(2 * 2 / 6) / 2 = 0
}

TEST(LrSchedule, OneCycleWithoutMomentumAndRequiredKeys) {
  auto s = one_cycle();
  s.cycle_momentum = false;
  auto lr = LrSchedule::create(s, optimizer(0.5));
  EXPECT_FALSE(lr->beta1(2).has_value());
  EXPECT_FALSE(lr->beta2(2).has_value());
  EXPECT_NE(create_error(scheduler("OneCycle")).find("scheduler.params.cycle_max_lr"),
            std::string::npos);
}

TEST(LrSchedule, LrRangeTest) {
  auto s = scheduler("LRRangeTest");
  s.lr_range_test_min_lr = 0.001;
  s.lr_range_test_step_size = 10;
  s.lr_range_test_step_rate = 2.0;
  auto lr = LrSchedule::create(s, optimizer(0.5));
  EXPECT_NEAR(lr->lr(0), 0.001, kTol);
  EXPECT_NEAR(lr->lr(5), 0.002, kTol);   // 1 + 2 * 0.5
  EXPECT_NEAR(lr->lr(20), 0.005, kTol);  // 1 + 2 * 2
  s.lr_range_test_staircase = true;
  lr = LrSchedule::create(s, optimizer(0.5));
  EXPECT_NEAR(lr->lr(5), 0.001, kTol);
  EXPECT_NEAR(lr->lr(15), 0.003, kTol);
}

TEST(LrSchedule, UnknownTypeNamesTheKey) {
  EXPECT_NE(create_error(scheduler("Cosine")).find("scheduler.type"), std::string::npos);
}

}  // namespace lr_schedule_test
}  // namespace deepshard::optim
