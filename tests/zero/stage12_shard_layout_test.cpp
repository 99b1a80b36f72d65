// The stage-1/2 layout math (ShardLayout): every element of every parameter is owned by exactly
// one rank, every bucket splits into N equal slices with less than N padding, and the optimizer
// ranges of the shards carry each parameter's weight decay. Also GradBuckets' bounded in-flight
// reductions with completion callbacks, which stage 2 relies on to reuse its receive buffers.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "zero/grad_buckets.h"
#include "zero/shard_layout.h"

namespace deepshard::zero {
namespace stage12_shard_layout_test {

const std::vector<std::vector<int64_t>> kSizes = {
    {7}, {4, 4, 4, 10, 2}, {1, 1, 1}, {63, 189, 3969, 63, 11907, 65}, {5, 100, 3, 17, 17, 1}};

TEST(ShardLayout, EveryElementOwnedOnceSlicesEqualPaddingBelowN) {
  for (const auto& sizes : kSizes) {
    for (int n = 1; n <= 5; ++n) {
      for (int64_t bucket_numel : {0, 1, 8, 20, 1000}) {
        ShardLayout layout(sizes, bucket_numel, n);
        SCOPED_TRACE(::testing::Message() << "N " << n << " bucket " << bucket_numel);
        std::vector<int> owners(layout.padded_numel(), 0);
        int64_t expected_offset = 0, shard = 0;
        for (size_t b = 0; b < layout.buckets().size(); ++b) {
          const ShardBucket& bucket = layout.buckets()[b];
          EXPECT_EQ(bucket.offset, expected_offset);  // buckets tile the buffer
          EXPECT_EQ(bucket.numel % n, 0);
          EXPECT_EQ(bucket.shard_numel * n, bucket.numel);
          EXPECT_EQ(bucket.shard_offset, shard);
          int64_t used = 0;
          for (size_t s = bucket.first_slot; s < bucket.first_slot + bucket.num_slots; ++s) {
            EXPECT_EQ(layout.slot_offsets()[s], bucket.offset + used);
            used += sizes[s];
          }
          EXPECT_GE(bucket.numel - used, 0);
          EXPECT_LT(bucket.numel - used, n) << "padding of bucket " << b;
          if (bucket_numel > 0 && bucket.num_slots > 1) {
            EXPECT_LE(used, bucket_numel);
          }
          for (int r = 0; r < n; ++r) {
            for (int64_t i = 0; i < bucket.shard_numel; ++i)
              ++owners[layout.owned_offset(b, r) + i];
          }
          expected_offset += bucket.numel;
          shard += bucket.shard_numel;
          EXPECT_EQ(layout.bucket_at(bucket.offset), b);
        }
        EXPECT_EQ(layout.padded_numel(), expected_offset);
        EXPECT_EQ(layout.shard_numel(), shard);
        for (int64_t i = 0; i < layout.padded_numel(); ++i) ASSERT_EQ(owners[i], 1) << i;
        size_t slots = 0;
        for (const auto& b : layout.buckets()) slots += b.num_slots;
        EXPECT_EQ(slots, sizes.size());
      }
    }
  }
}

TEST(ShardLayout, ShardRangesCoverEveryParameterElementOnceWithItsDecay) {
  for (const auto& sizes : kSizes) {
    std::vector<double> decay;
    for (size_t s = 0; s < sizes.size(); ++s) decay.push_back(s % 2 ? 0.0 : 0.1 * (s + 1));
    for (int n = 1; n <= 4; ++n) {
      ShardLayout layout(sizes, 20, n);
      // Element -> decay as seen through the shards; -1: not covered.
      std::vector<double> seen(layout.padded_numel(), -1.0);
      int64_t covered = 0;
      for (int r = 0; r < n; ++r) {
        const auto in_flat = layout.shard_ranges(r, decay, /*in_flat_buffer=*/true);
        const auto ranges = layout.shard_ranges(r, decay);
        ASSERT_EQ(in_flat.size(), ranges.size());
        for (size_t i = 0; i < ranges.size(); ++i) {
          const auto& range = ranges[i];
          ASSERT_EQ(range.param_offset, -1);
          ASSERT_EQ(in_flat[i].offset, range.offset);
          ASSERT_GT(range.numel, 0);
          ASSERT_LE(range.offset + range.numel, layout.shard_numel());
          // Shard position -> flat position: find the bucket slice holding it.
          for (int64_t k = range.offset; k < range.offset + range.numel; ++k) {
            size_t b = 0;
            while (layout.buckets()[b].shard_offset + layout.buckets()[b].shard_numel <= k) ++b;
            const int64_t flat = layout.owned_offset(b, r) + (k - layout.buckets()[b].shard_offset);
            // The fp32 engine's in-place ranges point at the same flat elements.
            ASSERT_EQ(in_flat[i].param_offset + (k - range.offset), flat);
            ASSERT_EQ(seen[flat], -1.0) << "element " << flat << " covered twice";
            seen[flat] = range.weight_decay;
            ++covered;
          }
        }
      }
      int64_t total = 0;
      for (size_t s = 0; s < sizes.size(); ++s) {
        total += sizes[s];
        for (int64_t i = 0; i < sizes[s]; ++i) {
          ASSERT_EQ(seen[layout.slot_offsets()[s] + i], decay[s]) << "slot " << s << " elem " << i;
        }
      }
      EXPECT_EQ(covered, total);  // padding is in no range
    }
  }
}

TEST(ShardLayout, RejectsBadInput) {
  EXPECT_ANY_THROW(ShardLayout({}, 10, 2));
  EXPECT_ANY_THROW(ShardLayout({3, 0}, 10, 2));
  EXPECT_ANY_THROW(ShardLayout({3}, 10, 0));
  EXPECT_ANY_THROW(ShardLayout({3, 3}, 3, 2).bucket_at(1));
}

// Stage 2 with overlap_comm: at most two reductions in flight; a bucket's completion (adding its
// received slice, zeroing its gradients) runs before the bucket that reuses its buffer starts.
TEST(GradBucketsInFlight, CompletesTheOldestBeforeStartingBeyondTheLimit) {
  for (size_t limit : {1, 2}) {
    std::vector<std::string> events;
    std::vector<GradBuckets::Slot> buckets = {{0, 2}, {2, 2}, {4, 2}, {6, 2}};
    GradBuckets b(buckets, {0, 1, 2, 3}, [&](int64_t offset, int64_t) {
      events.push_back("start " + std::to_string(offset / 2));
      return comm::Work();
    });
    b.set_completion([&](size_t i) { events.push_back("done " + std::to_string(i)); });
    b.set_max_in_flight(limit);
    b.begin();
    for (size_t i = 0; i < 4; ++i) b.mark_ready(i);
    b.finish();
    std::vector<std::string> expected =
        limit == 1 ? std::vector<std::string>{"start 0", "done 0", "start 1", "done 1",
                                              "start 2", "done 2", "start 3", "done 3"}
                   : std::vector<std::string>{"start 0", "start 1", "done 0", "start 2",
                                              "done 1",  "start 3", "done 2", "done 3"};
    EXPECT_EQ(events, expected) << "limit " << limit;
  }
}

}  // namespace stage12_shard_layout_test
}  // namespace deepshard::zero
