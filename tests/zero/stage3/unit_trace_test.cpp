// UnitTrace on one rank: the first pass records the unit order, later passes follow it; a pass in
// another order invalidates the trace with one warning (not one per departure), the next pass
// records the new order and the one after follows it.
#include "zero/stage3/unit_trace.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "deepshard/comm/group.h"

namespace deepshard::zero {
namespace unit_trace_test {

TEST(UnitTrace, ChangedOrderWarnsOnceAndIsRecordedAgain) {
  auto group = comm::Group::create(comm::RendezvousInfo{}, std::chrono::seconds(10));
  UnitTrace trace({"root", "h.0", "h.1"});
  // One forward + backward; whether each fetch followed the trace.
  auto pass = [&](const std::vector<size_t>& order) {
    std::vector<bool> following;
    for (size_t u : order) following.push_back(trace.on_fetch(u));
    trace.end_pass(*group);
    return following;
  };
  const std::vector<size_t> forward_first = {1, 2, 0, 2, 1}, reversed = {2, 1, 0, 1, 2};
  const std::vector<bool> none(5, false), all(5, true);
  EXPECT_FALSE(trace.complete());
  EXPECT_EQ(pass(forward_first), none);  // recording
  ASSERT_TRUE(trace.complete());
  EXPECT_EQ(trace.units(), forward_first);
  EXPECT_EQ(pass(forward_first), all);

  ::testing::internal::CaptureStderr();
  EXPECT_EQ(pass(reversed), none);  // departs at the first fetch
  EXPECT_FALSE(trace.complete());
  EXPECT_EQ(pass(reversed), none);  // recorded again
  ASSERT_TRUE(trace.complete());
  EXPECT_EQ(trace.units(), reversed);
  EXPECT_EQ(pass(reversed), all);
  EXPECT_EQ(pass(forward_first), none);  // departs again: no second warning
  const std::string err = ::testing::internal::GetCapturedStderr();
  const std::string warning = "departs from the recorded order";
  const auto first = err.find(warning);
  ASSERT_NE(first, std::string::npos) << err;
  EXPECT_EQ(err.find(warning, first + 1), std::string::npos) << "warned twice: " << err;
  EXPECT_NE(err.find("unit h.1 fetched at position 0"), std::string::npos) << err;
}

}  // namespace unit_trace_test
}  // namespace deepshard::zero
