// The per-rank checkpoint shard file: a header (magic "DSSHARD\0", format version, rank, world
// size, tensor count, header CRC32) followed by named float32/bfloat16 tensors, each record (name,
// dtype, shape, bytes) closed by its CRC32. Written to <path>.tmp, fsynced and renamed. ShardReader
// indexes a file by reading the header and every record's metadata (seeking over the data), then
// reads single records on demand, verifying their CRCs; errors name the file and the tensor.
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
ShardFile read_shard_file(const std::string& path);  // CPU tensors, every CRC verified

class ShardReader {
 public:
  struct Record {
    std::string name;
    at::ScalarType dtype;
    std::vector<int64_t> shape;
    uint64_t begin = 0;        // the record's first byte in the file
    uint64_t data_offset = 0;  // its data's first byte
    uint64_t nbytes = 0;       // data bytes
  };

  // Opens `path` and indexes it: header (magic, CRC, version), every record's metadata, bounds and
  // the absence of trailing bytes. IoError naming the file on any problem.
  explicit ShardReader(std::string path);
  ~ShardReader();
  ShardReader(const ShardReader&) = delete;
  ShardReader& operator=(const ShardReader&) = delete;

  const std::string& path() const { return path_; }
  int64_t rank() const { return rank_; }
  int64_t world_size() const { return world_size_; }
  const std::vector<Record>& records() const { return records_; }
  // Reads record `index` (its whole bytes, CRC verified) into a CPU tensor of its dtype.
  at::Tensor read(size_t index) const;

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
  int64_t rank_ = 0, world_size_ = 1;
  std::vector<Record> records_;
};

}  // namespace deepshard::checkpoint
