// Tests of PartitionSwapper (partition_swapper.h): partitions written, read ahead and acquired
// with their bytes intact; pieces rewritten in place; the pool's limits (buffer_count and
// buffer_size named in the errors); RAM held is the pool's.
#include "offload/partition_swapper.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "deepshard/util/error.h"
#include "support/test_support.h"

namespace deepshard::offload {
namespace partition_swapper_test {

using deepshard::testing::TempDir;

std::vector<uint8_t> bytes_of(size_t p, int64_t n) {
  std::vector<uint8_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(p * 31 + i * 7);
  return v;
}

PartitionSwapOptions options(const TempDir& root, int64_t count, int64_t buffer_bytes) {
  PartitionSwapOptions o;
  o.nvme_path = root.path();
  o.run = "r";
  o.buffer_count = count;
  o.buffer_bytes = buffer_bytes;
  return o;
}

TEST(PartitionSwapper, ReadsAheadAndHandsOutThePartitionsBytes) {
  TempDir root;
  const std::vector<int64_t> sizes = {10000, 0, 4096, 12345};
  PartitionSwapper s(sizes, options(root, 2, 16384));
  EXPECT_EQ(s.held_bytes(), 3 * 16384);
  for (size_t p = 0; p < sizes.size(); ++p) {
    if (sizes[p] > 0) s.write(p, bytes_of(p, sizes[p]).data());
  }
  EXPECT_TRUE(s.prefetch(0));
  EXPECT_TRUE(s.prefetch(2));
  EXPECT_FALSE(s.prefetch(3));  // both buffers taken
  EXPECT_EQ(std::memcmp(s.acquire(2), bytes_of(2, 4096).data(), 4096), 0);
  // Acquiring a partition not read ahead drops unused read-ahead (partition 0's) for it.
  EXPECT_EQ(std::memcmp(s.acquire(3), bytes_of(3, 12345).data(), 12345), 0);
  EXPECT_FALSE(s.in_ram(0));
  s.release(3);
  EXPECT_EQ(std::memcmp(s.acquire(0), bytes_of(0, 10000).data(), 10000), 0);
  try {
    s.acquire(3);
    FAIL() << "a third partition was handed out with two buffers";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("offload_param.buffer_count"), std::string::npos);
  }
  s.release(0);
  EXPECT_EQ(std::memcmp(s.acquire(3), bytes_of(3, 12345).data(), 12345), 0);
  s.release(3);
  s.release(2);
  // A piece rewritten in place: the aligned first page of partition 3, then its tail.
  std::vector<uint8_t> page(4096, 0xab), tail(12345 - 8192, 0xcd);
  s.write(3, 0, page.data(), 4096);
  s.write(3, 8192, tail.data(), static_cast<int64_t>(tail.size()));
  auto expect = bytes_of(3, 12345);
  std::memset(expect.data(), 0xab, 4096);
  std::memset(expect.data() + 8192, 0xcd, tail.size());
  EXPECT_EQ(std::memcmp(s.acquire(3), expect.data(), 12345), 0);
  s.release(3);
  s.prefetch(0);
  s.drop_unused();
  EXPECT_FALSE(s.in_ram(0));
}

TEST(PartitionSwapper, APartitionLargerThanABufferNamesBufferSize) {
  TempDir root;
  try {
    PartitionSwapper s({100000}, options(root, 2, 8192));
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("offload_param.buffer_size"), std::string::npos);
  }
}

}  // namespace partition_swapper_test
}  // namespace deepshard::offload
