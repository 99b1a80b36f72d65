// Implementation of data_fingerprint (see data_fingerprint.h).
#include "train/data_fingerprint.h"

#include <cstdio>
#include <fstream>
#include <vector>

#include "checkpoint/crc32.h"
#include "deepshard/util/error.h"

namespace deepshard::train {

std::string data_fingerprint(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  DS_CHECK(in.good(), IoError, path, ": cannot open the data file to fingerprint it");
  std::vector<char> buffer(size_t(1) << 20);
  uint32_t crc = 0;
  uint64_t size = 0;
  while (in) {
    in.read(buffer.data(), std::streamsize(buffer.size()));
    const auto n = size_t(in.gcount());
    crc = checkpoint::crc32(buffer.data(), n, crc);
    size += n;
  }
  DS_CHECK(in.eof(), IoError, path, ": read error while fingerprinting the data file");
  char text[64];
  std::snprintf(text, sizeof(text), "size %llu crc32 %08x", static_cast<unsigned long long>(size),
                crc);
  return text;
}

}  // namespace deepshard::train
