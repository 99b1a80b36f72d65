// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) and TFRecord's masked form, which
// TensorBoard's event files put after each record's length and data.
#pragma once

#include <cstddef>
#include <cstdint>

namespace deepshard::monitor::detail {

uint32_t crc32c(const void* data, size_t size);
// TFRecord's mask: rotate right by 15 and add 0xa282ead8.
uint32_t masked_crc32c(const void* data, size_t size);

}  // namespace deepshard::monitor::detail
