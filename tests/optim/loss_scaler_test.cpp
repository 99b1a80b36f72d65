// The loss scaler against DeepSpeed's DynamicLossScaler rules (§4.1 of the behaviour doc): every
// transition (hysteresis consumed then halving, growth counted from the last overflow, hysteresis
// refills, the min-scale clamp and the error at the minimum), construction from the fp16 section,
// the static scaler, and checkpoint state round trips.
#include "optim/loss_scaler.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "deepshard/util/error.h"

namespace deepshard::optim {
namespace loss_scaler_test {

DynamicScaleParams small_window(int64_t window, int hysteresis) {
  DynamicScaleParams p;
  p.init_scale = 1024.0;
  p.scale_window = window;
  p.delayed_shift = hysteresis;
  return p;
}

void clean_steps(LossScaler& s, int count) {
  for (int i = 0; i < count; ++i) s.update_scale(false, /*log_overflow=*/false);
}
void overflow(LossScaler& s) { s.update_scale(true, /*log_overflow=*/false); }

TEST(LossScaler, DynamicFromConfigStartsAtTwoToTheInitialPower) {
  config::Fp16Config fp16;
  fp16.enabled = true;
  fp16.initial_scale_power = 12;
  fp16.loss_scale_window = 7;
  fp16.hysteresis = 3;
  fp16.min_loss_scale = 0.5;
  fp16.consecutive_hysteresis = true;
  const LossScaler s = LossScaler::from_config(fp16);
  EXPECT_TRUE(s.is_dynamic());
  EXPECT_EQ(s.scale(), 4096.0);
  EXPECT_EQ(s.state().cur_iter, 0);
  EXPECT_EQ(s.state().last_overflow_iter, -1);
  EXPECT_EQ(s.state().cur_hysteresis, 3);
  EXPECT_EQ(s.params().scale_window, 7);
  EXPECT_EQ(s.params().min_scale, 0.5);
  EXPECT_TRUE(s.params().consecutive_hysteresis);
  EXPECT_EQ(s.params().scale_factor, 2.0);
  EXPECT_TRUE(s.params().raise_error_at_min_scale);

  // DeepSpeed's defaults: 2^16, window 1000, hysteresis 2.
  config::Fp16Config defaults;
  defaults.enabled = true;
  const LossScaler d = LossScaler::from_config(defaults);
  EXPECT_EQ(d.scale(), 65536.0);
  EXPECT_EQ(d.params().scale_window, 1000);
  EXPECT_EQ(d.state().cur_hysteresis, 2);
}

TEST(LossScaler, HysteresisIsConsumedBeforeTheScaleHalves) {
  LossScaler s = LossScaler::dynamic(small_window(100, 2));
  overflow(s);  // consumes hysteresis only
  EXPECT_EQ(s.scale(), 1024.0);
  EXPECT_EQ(s.state().cur_hysteresis, 1);
  EXPECT_EQ(s.state().last_overflow_iter, 0);
  clean_steps(s, 5);  // clean steps do not refill it (non-consecutive mode, no growth)
  EXPECT_EQ(s.state().cur_hysteresis, 1);
  overflow(s);  // at iteration 6 the hysteresis is used up: halve
  EXPECT_EQ(s.scale(), 512.0);
  EXPECT_EQ(s.state().cur_hysteresis, 1);
  EXPECT_EQ(s.state().last_overflow_iter, 6);
  overflow(s);
  EXPECT_EQ(s.scale(), 256.0);
  EXPECT_EQ(s.state().cur_iter, 8);

  LossScaler no_delay = LossScaler::dynamic(small_window(100, 1));
  overflow(no_delay);  // delayed_shift 1: the first overflow halves
  EXPECT_EQ(no_delay.scale(), 512.0);
}

// stable = cur_iter - last_overflow_iter - 1 must be a positive multiple of the window.
TEST(LossScaler, GrowthIsCountedFromTheLastOverflow) {
  const int window = 4;
  LossScaler s = LossScaler::dynamic(small_window(window, 2));
  // From the start (last_overflow_iter = -1) the update at cur_iter = 4 has stable = 4.
  clean_steps(s, window);  // cur_iter 0..3: stable -1..2... (0..3), no growth
  EXPECT_EQ(s.scale(), 1024.0);
  clean_steps(s, 1);  // cur_iter 4: stable 4
  EXPECT_EQ(s.scale(), 2048.0);
  clean_steps(s, window - 1);  // cur_iter 5..7
  EXPECT_EQ(s.scale(), 2048.0);
  clean_steps(s, 1);  // cur_iter 8: stable 8
  EXPECT_EQ(s.scale(), 4096.0);

  // An overflow at cur_iter 9 (hysteresis only) restarts the count: stable at cur_iter 10 is 0,
  // the next growth is at cur_iter 9 + 1 + window = 14.
  overflow(s);
  EXPECT_EQ(s.state().last_overflow_iter, 9);
  clean_steps(s, window);  // cur_iter 10..13
  EXPECT_EQ(s.scale(), 4096.0);
  clean_steps(s, 1);  // cur_iter 14
  EXPECT_EQ(s.scale(), 8192.0);
  EXPECT_EQ(s.state().cur_iter, 15);
}

TEST(LossScaler, GrowthRefillsTheHysteresis) {
  const int window = 3;
  LossScaler s = LossScaler::dynamic(small_window(window, 2));
  overflow(s);  // iteration 0: hysteresis 2 -> 1
  EXPECT_EQ(s.state().cur_hysteresis, 1);
  clean_steps(s, window + 1);  // iterations 1..4; growth at 0 + 1 + 3 = 4
  EXPECT_EQ(s.scale(), 2048.0);
  EXPECT_EQ(s.state().cur_hysteresis, 2);
  overflow(s);  // consumes the refilled hysteresis, scale kept
  EXPECT_EQ(s.scale(), 2048.0);
  EXPECT_EQ(s.state().cur_hysteresis, 1);
}

TEST(LossScaler, ConsecutiveHysteresisRefillsOnEveryCleanStep) {
  DynamicScaleParams p = small_window(100, 2);
  p.consecutive_hysteresis = true;
  LossScaler s = LossScaler::dynamic(p);
  for (int round = 0; round < 3; ++round) {
    overflow(s);
    EXPECT_EQ(s.state().cur_hysteresis, 1);
    clean_steps(s, 1);
    EXPECT_EQ(s.state().cur_hysteresis, 2);
  }
  EXPECT_EQ(s.scale(), 1024.0);  // isolated overflows never halve
  overflow(s);
  overflow(s);  // two in a row do
  EXPECT_EQ(s.scale(), 512.0);
}

TEST(LossScaler, MinimumScaleClampsThenRaisesDeepSpeedsError) {
  DynamicScaleParams p = small_window(100, 1);
  p.init_scale = 4.0;
  p.min_scale = 1.5;
  LossScaler s = LossScaler::dynamic(p);
  overflow(s);
  EXPECT_EQ(s.scale(), 2.0);
  overflow(s);
  EXPECT_EQ(s.scale(), 1.5);  // max(1, 1.5)
  const LossScalerState before = s.state();
  try {
    overflow(s);
    ADD_FAILURE() << "no error at the minimum scale";
  } catch (const Error& e) {
    EXPECT_EQ(
        std::string(e.what()),
        "Current loss scale already at minimum - cannot decrease scale anymore. Exiting run.");
  }
  EXPECT_EQ(s.state().cur_iter, before.cur_iter);  // nothing changed
  EXPECT_EQ(s.scale(), 1.5);

  // Without the error flag the scale just stays at the minimum.
  p.raise_error_at_min_scale = false;
  LossScaler quiet = LossScaler::dynamic(p);
  for (int i = 0; i < 4; ++i) overflow(quiet);
  EXPECT_EQ(quiet.scale(), 1.5);
  EXPECT_EQ(quiet.state().cur_iter, 4);
}

TEST(LossScaler, StaticScalerNeverChanges) {
  config::Fp16Config fp16;
  fp16.enabled = true;
  fp16.loss_scale = 128.0;
  for (const auto& [scaler, expected] :
       {std::pair{LossScaler::from_config(fp16), 128.0},
        std::pair{LossScaler::from_config(config::Fp16Config{}), 1.0},  // bf16 / fp32
        std::pair{LossScaler::fixed(3.0), 3.0}}) {
    LossScaler s = scaler;
    EXPECT_FALSE(s.is_dynamic());
    for (int i = 0; i < 50; ++i) s.update_scale(i % 3 == 0, false);
    EXPECT_EQ(s.scale(), expected);
  }
  EXPECT_THROW(LossScaler::fixed(0.0), ConfigError);
}

TEST(LossScaler, StateRoundTripContinuesIdentically) {
  const DynamicScaleParams p = small_window(5, 3);
  LossScaler a = LossScaler::dynamic(p);
  const std::vector<bool> history = {false, true,  false, false, true, false, false,
                                     false, false, false, false, true, true,  true};
  for (bool o : history) a.update_scale(o, false);
  LossScaler b = LossScaler::dynamic(p);
  b.set_state(a.state());
  for (int i = 0; i < 40; ++i) {
    const bool o = i % 9 == 4;
    a.update_scale(o, false);
    b.update_scale(o, false);
    ASSERT_EQ(a.scale(), b.scale()) << "update " << i;
    ASSERT_EQ(a.state().cur_hysteresis, b.state().cur_hysteresis);
    ASSERT_EQ(a.state().last_overflow_iter, b.state().last_overflow_iter);
  }
  EXPECT_EQ(b.state().cur_iter, int64_t(history.size()) + 40);

  EXPECT_THROW(b.set_state({.cur_scale = 0.0}), Error);
  EXPECT_THROW(b.set_state({.cur_scale = 8.0, .cur_iter = 3, .last_overflow_iter = 3}), Error);
  EXPECT_THROW(b.set_state({.cur_scale = 8.0, .cur_iter = 3, .cur_hysteresis = 4}), Error);
  EXPECT_THROW(b.set_state({.cur_scale = 8.0, .cur_iter = 3, .cur_hysteresis = 0}), Error);
}

TEST(LossScaler, RejectsBadParameters) {
  DynamicScaleParams p;
  p.scale_window = 0;
  EXPECT_THROW(LossScaler::dynamic(p), ConfigError);
  p = {};
  p.delayed_shift = 0;
  EXPECT_THROW(LossScaler::dynamic(p), ConfigError);
  p = {};
  p.min_scale = 0.0;
  EXPECT_THROW(LossScaler::dynamic(p), ConfigError);
}

}  // namespace loss_scaler_test
}  // namespace deepshard::optim
