// TFRecord framing, as TensorBoard's event files use it: each record is its length (uint64, little
// endian), the masked CRC-32C of those 8 bytes, the data, and the masked CRC-32C of the data.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace deepshard::monitor::detail {

// The framed bytes of one record.
std::string frame_record(std::string_view data);

struct RecordView {
  int64_t offset = 0;  // of the record's first byte in the file
  std::string_view data;
};

// Splits `bytes` into records, checking both CRCs of each. Throws IoError naming `name` and the
// byte offset of the first bad or truncated record.
std::vector<RecordView> split_records(std::string_view bytes, const std::string& name);

}  // namespace deepshard::monitor::detail
