// read_event_file / parse_event_file (tensorboard.h): TFRecord framing checked, then each record
// parsed as a TensorBoard Event with the protoc-generated class.
#include <fstream>
#include <sstream>

#include "deepshard/util/error.h"
#include "monitor/tensorboard.h"
#include "monitor/tfrecord.h"
#include "tensorboard_event.pb.h"

namespace deepshard::monitor {

std::vector<EventRecord> parse_event_file(const std::string& bytes, const std::string& name) {
  std::vector<EventRecord> out;
  for (const auto& record : detail::split_records(bytes, name)) {
    tensorboard::Event event;
    DS_CHECK(event.ParseFromArray(record.data.data(), static_cast<int>(record.data.size())),
             IoError, name, ": the record at byte ", record.offset,
             " is not a TensorBoard Event protobuf");
    EventRecord r;
    r.offset = record.offset;
    r.wall_time = event.wall_time();
    r.step = event.step();
    if (event.has_file_version()) r.file_version = event.file_version();
    if (event.has_summary()) {
      for (const auto& v : event.summary().value()) {
        if (v.value_case() == tensorboard::Summary::Value::kSimpleValue)
          r.scalars.push_back({v.tag(), v.simple_value()});
      }
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<EventRecord> read_event_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  DS_CHECK(in.good(), IoError, path, ": cannot open the event file");
  std::ostringstream buf;
  buf << in.rdbuf();
  return parse_event_file(buf.str(), path);
}

}  // namespace deepshard::monitor
