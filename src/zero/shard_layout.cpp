// Implementation of ShardLayout (see shard_layout.h).
#include "zero/shard_layout.h"

#include <algorithm>

#include "deepshard/util/error.h"

namespace deepshard::zero {

ShardLayout::ShardLayout(const std::vector<int64_t>& numels, int64_t bucket_numel, int world_size)
    : world_size_(world_size), slot_numels_(numels) {
  DS_CHECK(world_size >= 1, Error, "ShardLayout: world size ", world_size, " < 1");
  DS_CHECK(!numels.empty(), Error, "ShardLayout: no parameters");
  const int64_t n = world_size;
  auto close = [&](ShardBucket& b) {
    b.numel = (b.numel + n - 1) / n * n;
    b.shard_numel = b.numel / n;
    b.shard_offset = shard_numel_;
    shard_numel_ += b.shard_numel;
    padded_numel_ = b.offset + b.numel;
    buckets_.push_back(b);
  };
  ShardBucket current;
  for (size_t i = 0; i < numels.size(); ++i) {
    DS_CHECK(numels[i] > 0, Error, "ShardLayout: parameter ", i, " has ", numels[i], " elements");
    if (current.num_slots > 0 && bucket_numel > 0 && current.numel + numels[i] > bucket_numel) {
      close(current);
      current = ShardBucket{};
      current.offset = padded_numel_;
      current.first_slot = i;
    }
    slot_offsets_.push_back(current.offset + current.numel);
    current.numel += numels[i];
    current.num_slots += 1;
  }
  close(current);
}

size_t ShardLayout::bucket_at(int64_t offset) const {
  auto it = std::lower_bound(buckets_.begin(), buckets_.end(), offset,
                             [](const ShardBucket& b, int64_t o) { return b.offset < o; });
  DS_CHECK(it != buckets_.end() && it->offset == offset, Error, "ShardLayout: no bucket starts at ",
           offset);
  return static_cast<size_t>(it - buckets_.begin());
}

int64_t ShardLayout::owned_offset(size_t bucket, int rank) const {
  DS_ASSERT(bucket < buckets_.size() && rank >= 0 && rank < world_size_);
  return buckets_[bucket].offset + rank * buckets_[bucket].shard_numel;
}

std::vector<OwnedPiece> ShardLayout::owned_pieces(int rank) const {
  std::vector<OwnedPiece> out;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const int64_t begin = owned_offset(b, rank), end = begin + buckets_[b].shard_numel;
    for (size_t s = buckets_[b].first_slot; s < buckets_[b].first_slot + buckets_[b].num_slots;
         ++s) {
      const int64_t lo = std::max(begin, slot_offsets_[s]);
      const int64_t hi = std::min(end, slot_offsets_[s] + slot_numels_[s]);
      if (lo >= hi) continue;
      out.push_back(
          {s, lo - slot_offsets_[s], hi - lo, buckets_[b].shard_offset + (lo - begin), lo});
    }
  }
  return out;
}

std::vector<optim::ParamRange> ShardLayout::shard_ranges(int rank,
                                                         const std::vector<double>& weight_decay,
                                                         bool in_flat_buffer) const {
  DS_ASSERT(weight_decay.size() == slot_numels_.size());
  std::vector<optim::ParamRange> out;
  for (const OwnedPiece& p : owned_pieces(rank)) {
    out.push_back(
        {p.shard_offset, p.numel, weight_decay[p.slot], in_flat_buffer ? p.flat_offset : -1});
  }
  return out;
}

}  // namespace deepshard::zero
