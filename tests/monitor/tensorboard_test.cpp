// TensorBoard event files: CRC-32C, TFRecord framing, our writer read back, and files written by
// TensorFlow and by tensorboard_logger parsed with the same reader.
#include "monitor/tensorboard.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "deepshard/util/error.h"
#include "monitor/crc32c.h"
#include "monitor/event_encoding.h"
#include "monitor/event_fixtures.h"
#include "monitor/tfrecord.h"
#include "support/test_support.h"

namespace deepshard::monitor {
namespace tensorboard_test {

TEST(Crc32c, MatchesTheCastagnoliCheckValue) {
  // The standard check value of CRC-32C (RFC 3720 appendix B.4 lists 32 zero bytes too).
  EXPECT_EQ(detail::crc32c("123456789", 9), 0xE3069283u);
  const std::string zeros(32, '\0');
  EXPECT_EQ(detail::crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
}

TEST(TfRecord, FramesLengthCrcDataCrc) {
  const std::string framed = detail::frame_record("abc");
  ASSERT_EQ(framed.size(), 8u + 4 + 3 + 4);
  EXPECT_EQ(framed[0], 3);
  EXPECT_EQ(framed.substr(12, 3), "abc");
  const std::string bytes = framed + detail::frame_record("");
  const auto records = detail::split_records(bytes, "mem");
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(std::string(records[0].data), "abc");
  EXPECT_EQ(records[1].offset, static_cast<int64_t>(framed.size()));
  EXPECT_TRUE(records[1].data.empty());
}

TEST(TfRecord, BadCrcsAndTruncationNameTheRecord) {
  const std::string first = detail::frame_record("hello");
  std::string bytes = first + detail::frame_record("world");
  std::string bad_data = bytes;
  bad_data[first.size() + 13] ^= 1;  // a data byte of the second record
  try {
    detail::split_records(bad_data, "f.tfevents");
    FAIL() << "no error";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("f.tfevents: bad data CRC-32C of the record at byte " +
                                         std::to_string(first.size())),
              std::string::npos)
        << e.what();
  }
  std::string bad_length = bytes;
  bad_length[8] ^= 1;
  EXPECT_THROW(detail::split_records(bad_length, "f"), IoError);
  EXPECT_THROW(detail::split_records(bytes.substr(0, bytes.size() - 2), "f"), IoError);
}

TEST(TensorBoardMonitor, WritesEventsThatReadBack) {
  testing::TempDir dir;
  std::string path;
  {
    TensorBoardMonitor tb(dir.file("run/job"));
    path = tb.path();
    tb.write_events({{"Train/Samples/train_loss", 2.5, 16}, {"Train/Samples/lr", 1e-3, 16}});
    tb.write_events({{"Train/Samples/train_loss", 2.25, 32}});
    tb.flush();
  }
  const auto name = std::filesystem::path(path).filename().string();
  EXPECT_EQ(std::filesystem::path(path).parent_path(), std::filesystem::path(dir.file("run/job")));
  EXPECT_EQ(name.rfind("events.out.tfevents.", 0), 0u) << name;
  const auto events = read_event_file(path);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  EXPECT_GT(events[0].wall_time, 1.6e9);
  EXPECT_TRUE(events[0].scalars.empty());
  ASSERT_EQ(events[1].scalars.size(), 1u);
  EXPECT_EQ(events[1].scalars[0].tag, "Train/Samples/train_loss");
  EXPECT_EQ(events[1].scalars[0].value, 2.5f);
  EXPECT_EQ(events[1].step, 16);
  EXPECT_EQ(events[2].scalars[0].tag, "Train/Samples/lr");
  EXPECT_EQ(events[2].scalars[0].value, 1e-3f);
  EXPECT_EQ(events[3].step, 32);
  EXPECT_EQ(events[3].scalars[0].value, 2.25f);
  EXPECT_GE(events[3].wall_time, events[0].wall_time);
}

TEST(TensorBoardMonitor, ATruncatedFileIsAnErrorNamingIt) {
  testing::TempDir dir;
  const std::string path = dir.file("events.out.tfevents.1.x");
  testing::write_file(path, detail::frame_record("not an event?").substr(0, 10));
  EXPECT_THROW(read_event_file(path), IoError);
  EXPECT_THROW(read_event_file(dir.file("missing")), IoError);
}

TEST(EventReader, ReadsRecordsWrittenByTensorFlow) {
  const auto events = parse_event_file(fixtures::tensorflow_records(), "tensorflow");
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].file_version, "brain.Event:1");
  EXPECT_EQ(events[1].file_version, "brain.Event:2");
  EXPECT_EQ(events[1].offset, 40);
  EXPECT_GT(events[0].wall_time, 1.4e9);  // 2015 and 2016
  EXPECT_GT(events[1].wall_time, events[0].wall_time);
}

TEST(EventReader, ReadsAFileWrittenByTensorboardLogger) {
  const auto events = parse_event_file(fixtures::tensorboard_logger_file(), "tensorboard_logger");
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  for (const auto& e : events) EXPECT_EQ(e.wall_time, 256.5);
  ASSERT_EQ(events[1].scalars.size(), 1u);
  EXPECT_EQ(events[1].scalars[0].tag, "v/1");
  EXPECT_EQ(events[1].scalars[0].value, 1.5f);
  EXPECT_EQ(events[1].step, 1);
  ASSERT_EQ(events[2].scalars.size(), 1u);
  EXPECT_EQ(events[2].scalars[0].tag, "v/22");
  EXPECT_EQ(events[2].scalars[0].value, 16.0f);
  EXPECT_EQ(events[2].step, 2);
}

TEST(EventReader, OurBytesMatchTensorboardLoggersForTheSameEvents) {
  // The same events encoded by our writer's path (protoc classes + framing) are byte for byte the
  // file tensorboard_logger wrote: the encoding is the real thing, not only self-consistent.
  const std::string ours = detail::frame_record(detail::file_version_event(256.5)) +
                           detail::frame_record(detail::scalar_event({"v/1", 1.5, 1}, 256.5)) +
                           detail::frame_record(detail::scalar_event({"v/22", 16.0, 2}, 256.5));
  EXPECT_EQ(ours, fixtures::tensorboard_logger_file());
}

}  // namespace tensorboard_test
}  // namespace deepshard::monitor
