// GradBuckets' bucketing and its start-in-order rule, with a reducer that records which ranges it
// was asked to reduce (the collective itself is tested in tests/comm with real ranks).
#include "zero/grad_buckets.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace deepshard::zero {
namespace grad_buckets_test {

struct Recorder {
  std::vector<std::pair<int64_t, int64_t>> calls;
  GradBuckets::Reducer reducer() {
    return [this](int64_t offset, int64_t numel) {
      calls.emplace_back(offset, numel);
      return comm::Work();
    };
  }
};

std::vector<GradBuckets::Slot> slots(const std::vector<int64_t>& sizes) {
  std::vector<GradBuckets::Slot> out;
  int64_t offset = 0;
  for (auto n : sizes) {
    out.push_back({offset, n});
    offset += n;
  }
  return out;
}

TEST(GradBuckets, GroupsSlotsUpToTheBucketSize) {
  Recorder r;
  GradBuckets b(slots({4, 4, 4, 10, 2}), 26, 8, r.reducer());
  EXPECT_EQ(b.num_buckets(), 4u);  // {4,4} {4} {10} {2 + 2 padding}
  b.begin();
  for (size_t i = 0; i < 5; ++i) b.mark_ready(i);
  b.finish();
  std::vector<std::pair<int64_t, int64_t>> expected = {{0, 8}, {8, 4}, {12, 10}, {22, 4}};
  EXPECT_EQ(r.calls, expected);
}

TEST(GradBuckets, StartsBucketsInIndexOrderWhateverTheHookOrder) {
  Recorder r;
  GradBuckets b(slots({3, 3, 3}), 9, 3, r.reducer());
  b.begin();
  b.mark_ready(2);
  b.mark_ready(1);
  EXPECT_TRUE(r.calls.empty());  // bucket 0 not ready: nothing may start before it
  b.mark_ready(0);
  std::vector<std::pair<int64_t, int64_t>> expected = {{0, 3}, {3, 3}, {6, 3}};
  EXPECT_EQ(r.calls, expected);
  b.finish();
  EXPECT_EQ(r.calls.size(), 3u);
}

TEST(GradBuckets, FinishStartsBucketsOfUnusedParameters) {
  Recorder r;
  GradBuckets b(slots({2, 2}), 4, 2, r.reducer());
  b.begin();
  b.mark_ready(1);  // slot 0 never gets a gradient
  EXPECT_TRUE(r.calls.empty());
  b.finish();
  EXPECT_EQ(r.calls.size(), 2u);
  EXPECT_FALSE(b.active());
}

TEST(GradBuckets, IgnoresHooksOutsideAPass) {
  Recorder r;
  GradBuckets b(slots({2}), 2, 0, r.reducer());
  b.mark_ready(0);  // a non-boundary micro-step: no reduction
  EXPECT_TRUE(r.calls.empty());
  b.begin();
  b.mark_ready(0);
  b.mark_ready(0);  // reported twice: still one reduction
  b.finish();
  EXPECT_EQ(r.calls.size(), 1u);
}

}  // namespace grad_buckets_test
}  // namespace deepshard::zero
