// Token files: a fixed header then the tokens, memory-mapped for reading.
// Layout (little-endian), documented in docs/data.md:
//   bytes 0-7   magic "DSTOKENS"
//   bytes 8-11  uint32 format version (1)
//   bytes 12-15 uint32 token dtype (2 = uint16, 4 = uint32: bytes per token)
//   bytes 16-23 uint64 token count
//   bytes 24-31 uint64 vocabulary size (every token is < this)
//   bytes 32-63 reserved (zero)
//   bytes 64-   the tokens
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace deepshard::data {

// Writes `tokens` (each < vocab_size <= 65536) as uint16 atomically: a temporary file beside
// `path`, fsync, rename, fsync of the directory; missing parent directories are created.
// Throws IoError naming the file.
void write_token_file(const std::string& path, const std::vector<uint16_t>& tokens,
                      int64_t vocab_size);

class TokenFile {
 public:
  // Maps the file and validates it fully: magic, version, dtype, size matching the count, and
  // every token < the vocabulary size (and < `model_vocab_size` when > 0). Throws IoError naming
  // the file and the problem (missing, empty, bad header, truncated, token out of range).
  explicit TokenFile(const std::string& path, int64_t model_vocab_size = 0);
  ~TokenFile();
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;

  const std::string& path() const { return path_; }
  int64_t size() const { return count_; }  // number of tokens
  int64_t vocab_size() const { return vocab_size_; }
  int64_t token(int64_t i) const;  // 0 <= i < size()
  // Copies tokens [start, start + n) into `out` as int64.
  void read(int64_t start, int64_t n, int64_t* out) const;

 private:
  std::string path_;
  int fd_ = -1;
  const uint8_t* map_ = nullptr;
  size_t map_bytes_ = 0;
  int64_t count_ = 0;
  int64_t vocab_size_ = 0;
  int bytes_per_token_ = 2;
};

}  // namespace deepshard::data
