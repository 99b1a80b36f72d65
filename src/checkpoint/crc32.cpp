// CRC-32 through zlib's crc32_z (the same polynomial and conventions; zlib's braided
// implementation is ~9x faster than a byte-wise table here: 0.17 s vs 1.6 s for 500 MB).
#include "checkpoint/crc32.h"

#include <zlib.h>

namespace deepshard::checkpoint {

uint32_t crc32(const void* data, size_t size, uint32_t crc) {
  if (size == 0) return crc;  // zlib returns 0 for a null buffer (an empty tensor's data)
  return static_cast<uint32_t>(
      ::crc32_z(crc, static_cast<const unsigned char*>(data), static_cast<z_size_t>(size)));
}

}  // namespace deepshard::checkpoint
