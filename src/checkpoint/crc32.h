// CRC-32 (IEEE 802.3, the zlib/PNG polynomial 0xEDB88320), incremental (zlib underneath).
#pragma once

#include <cstddef>
#include <cstdint>

namespace deepshard::checkpoint {

// crc32(data) == crc32(second, crc32(first)) for data = first + second; crc32("123456789") ==
// 0xCBF43926.
uint32_t crc32(const void* data, size_t size, uint32_t crc = 0);

}  // namespace deepshard::checkpoint
