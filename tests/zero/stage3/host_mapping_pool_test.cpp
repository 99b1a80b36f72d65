// HostMappingPool: a released mapping is reused by the next take of its size, the kept and live
// mappings never exceed the most that were live at once, at most kMaxKeptMappings are kept, and
// trim() gives them all back. Each test uses a pool of its own (not the process's).
#include "zero/stage3/host_mapping_pool.h"

#include <gtest/gtest.h>

#include <cstring>

namespace deepshard::zero {
namespace {

constexpr size_t kPage = 4096;

TEST(HostMappingPool, ReusesAReleasedMappingOfTheSameSize) {
  HostMappingPool pool;
  void* a = pool.take(3 * kPage);
  std::memset(a, 7, 3 * kPage);  // writable
  pool.give_back(a, 3 * kPage);
  EXPECT_EQ(pool.stats().kept_bytes, 3 * kPage);
  void* b = pool.take(3 * kPage);
  EXPECT_EQ(b, a);
  EXPECT_EQ(pool.stats().reused_mappings, 1u);
  EXPECT_EQ(pool.stats().fresh_mappings, 1u);
  EXPECT_EQ(pool.stats().live_bytes, 3 * kPage);
  EXPECT_EQ(pool.stats().kept_bytes, 0u);
  pool.give_back(b, 3 * kPage);
  pool.trim();
}

TEST(HostMappingPool, KeptAndLiveStayWithinTheHighWaterMark) {
  HostMappingPool pool;
  void* a = pool.take(4 * kPage);
  void* b = pool.take(2 * kPage);
  EXPECT_EQ(pool.stats().high_water_bytes, 6 * kPage);
  pool.give_back(a, 4 * kPage);
  pool.give_back(b, 2 * kPage);
  EXPECT_EQ(pool.stats().kept_bytes, 6 * kPage);
  // A size not kept: room is made by unmapping kept ones until live + kept + new fits.
  void* c = pool.take(3 * kPage);
  const HostMappingPool::Stats s = pool.stats();
  EXPECT_LE(s.live_bytes + s.kept_bytes, s.high_water_bytes);
  EXPECT_EQ(s.high_water_bytes, 6 * kPage);
  EXPECT_EQ(s.live_bytes, 3 * kPage);
  EXPECT_EQ(s.fresh_mappings, 3u);
  pool.give_back(c, 3 * kPage);
  pool.trim();
  EXPECT_EQ(pool.stats().kept_bytes, 0u);
  EXPECT_EQ(pool.stats().kept_mappings, 0u);
}

TEST(HostMappingPool, KeepsAtMostTheLimitAfterAWholeModelGather) {
  HostMappingPool pool;
  constexpr int kUnits = 6;
  void* units[kUnits];
  for (auto& u : units) u = pool.take(2 * kPage);
  EXPECT_EQ(pool.stats().high_water_bytes, kUnits * 2 * kPage);
  for (auto& u : units) pool.give_back(u, 2 * kPage);
  EXPECT_EQ(pool.stats().kept_mappings, HostMappingPool::kMaxKeptMappings);
  EXPECT_EQ(pool.stats().kept_bytes, HostMappingPool::kMaxKeptMappings * 2 * kPage);
  EXPECT_EQ(pool.stats().live_bytes, 0u);
  pool.trim();
}

}  // namespace
}  // namespace deepshard::zero
