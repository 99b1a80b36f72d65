// Implementation of tfrecord.h.
#include "monitor/tfrecord.h"

#include <cstring>

#include "deepshard/util/error.h"
#include "monitor/crc32c.h"

namespace deepshard::monitor::detail {
namespace {

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

uint64_t get_le(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v |= static_cast<uint64_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

}  // namespace

std::string frame_record(std::string_view data) {
  std::string out;
  out.reserve(data.size() + 16);
  put_le(out, data.size(), 8);
  put_le(out, masked_crc32c(out.data(), 8), 4);
  out.append(data);
  put_le(out, masked_crc32c(data.data(), data.size()), 4);
  return out;
}

std::vector<RecordView> split_records(std::string_view bytes, const std::string& name) {
  std::vector<RecordView> records;
  size_t pos = 0;
  while (pos < bytes.size()) {
    const int64_t offset = static_cast<int64_t>(pos);
    DS_CHECK(bytes.size() - pos >= 12, IoError, name, ": truncated record header at byte ", offset);
    const char* p = bytes.data() + pos;
    const uint64_t length = get_le(p, 8);
    DS_CHECK(get_le(p + 8, 4) == masked_crc32c(p, 8), IoError, name,
             ": bad length CRC-32C of the record at byte ", offset);
    DS_CHECK(bytes.size() - pos - 12 >= length + 4, IoError, name, ": record at byte ", offset,
             " claims ", length, " bytes but the file ends first");
    std::string_view data(p + 12, length);
    DS_CHECK(get_le(p + 12 + length, 4) == masked_crc32c(data.data(), data.size()), IoError, name,
             ": bad data CRC-32C of the record at byte ", offset);
    records.push_back({offset, data});
    pos += 12 + length + 4;
  }
  return records;
}

}  // namespace deepshard::monitor::detail
