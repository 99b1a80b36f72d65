// The per-rank checkpoint shard file: a header (magic "DSSHARD\0", format version, rank, world
// size, tensor count, header CRC32) followed by named float32/bfloat16 tensors, each record (name,
// dtype, shape, bytes) closed by its CRC32. Written to <path>.tmp, fsynced and renamed; reading
// verifies magic, version, every CRC and the length, naming the file and the tensor on failure.
// Layout in docs/checkpoint.md.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace deepshard::checkpoint {

inline constexpr char kShardMagic[8] = {'D', 'S', 'S', 'H', 'A', 'R', 'D', '\0'};
inline constexpr uint32_t kShardFormatVersion = 1;

struct ShardFile {
  int64_t rank = 0;
  int64_t world_size = 1;
  std::vector<std::pair<std::string, at::Tensor>> tensors;  // unique names, kept in order
};

void write_shard_file(const std::string& path, const ShardFile& shard);
ShardFile read_shard_file(const std::string& path);  // CPU tensors

}  // namespace deepshard::checkpoint
