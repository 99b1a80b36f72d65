// ShardLayout: where stage 1/2 put parameters in the flat buffers and which elements each rank
// owns. Parameters (in flat order) are grouped into buckets of at most bucket_numel elements (a
// larger parameter gets a bucket of its own); every bucket is padded to a multiple of the world
// size N and split into N equal slices; rank r owns slice r of every bucket (Megatron's
// distributed-optimizer layout: each bucket's reduction is one equal-chunk reduce-scatter, each
// parameter update one equal-chunk all-gather). A rank's shard is the concatenation of its slices,
// bucket after bucket.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "optim/adam.h"

namespace deepshard::zero {

struct ShardBucket {
  int64_t offset = 0;        // in the flat buffer
  int64_t numel = 0;         // a multiple of N (the padding, < N, is at the end)
  int64_t shard_offset = 0;  // of this bucket's slice in a rank's shard
  int64_t shard_numel = 0;   // numel / N
  size_t first_slot = 0, num_slots = 0;
};

// The part of one parameter (slot) a rank owns: elements [param_begin, param_begin + numel) of the
// flattened parameter, at shard_offset in the rank's shard and flat_offset in the flat buffer.
struct OwnedPiece {
  size_t slot = 0;
  int64_t param_begin = 0, numel = 0, shard_offset = 0, flat_offset = 0;
};

class ShardLayout {
 public:
  // `numels`: parameter sizes in flat order. bucket_numel <= 0: one bucket for everything.
  ShardLayout(const std::vector<int64_t>& numels, int64_t bucket_numel, int world_size);

  int world_size() const { return world_size_; }
  const std::vector<ShardBucket>& buckets() const { return buckets_; }
  const std::vector<int64_t>& slot_offsets() const { return slot_offsets_; }  // in the flat buffer
  int64_t padded_numel() const { return padded_numel_; }  // the flat buffer's size
  int64_t shard_numel() const { return shard_numel_; }    // per rank
  // The bucket starting at flat offset `offset` (throws if none does).
  size_t bucket_at(int64_t offset) const;
  // Flat offset of rank `rank`'s slice of bucket `bucket`.
  int64_t owned_offset(size_t bucket, int rank) const;
  // Optimizer ranges over rank `rank`'s shard: the intersection of every parameter with the slices
  // the rank owns, each with its parameter's weight decay (`weight_decay[slot]`).
  // `in_flat_buffer`: each range also gives its flat-buffer offset as param_offset (Adam then
  // updates the owned slices of the parameter buffer in place: no separate master copy).
  // The pieces of parameters rank `rank` owns, in shard order.
  std::vector<OwnedPiece> owned_pieces(int rank) const;
  std::vector<optim::ParamRange> shard_ranges(int rank, const std::vector<double>& weight_decay,
                                              bool in_flat_buffer = false) const;

 private:
  int world_size_;
  std::vector<ShardBucket> buckets_;
  std::vector<int64_t> slot_offsets_, slot_numels_;
  int64_t padded_numel_ = 0, shard_numel_ = 0;
};

}  // namespace deepshard::zero
