// TensorBoardMonitor: serialized Events (event_encoding.h) framed as TFRecords in one file.
#include "monitor/tensorboard.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include "deepshard/util/error.h"
#include "monitor/event_encoding.h"
#include "monitor/tfrecord.h"

namespace deepshard::monitor {
namespace {

double wall_time_now() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

// events.out.tfevents.<seconds>.<host>; a suffix keeps a second file of the same second apart.
std::string new_event_file(const std::filesystem::path& dir) {
  const auto seconds = static_cast<long long>(wall_time_now());
  const std::string base =
      (dir / ("events.out.tfevents." + std::to_string(seconds) + "." + host_name())).string();
  std::string path = base;
  for (int i = 1; std::filesystem::exists(path); ++i) path = base + "." + std::to_string(i);
  return path;
}

}  // namespace

TensorBoardMonitor::TensorBoardMonitor(const std::string& log_dir) {
  std::error_code ec;
  std::filesystem::create_directories(log_dir, ec);
  DS_CHECK(!ec, IoError, log_dir, ": cannot create the TensorBoard log directory: ", ec.message());
  path_ = new_event_file(log_dir);
  file_ = std::fopen(path_.c_str(), "wb");
  DS_CHECK(file_ != nullptr, IoError, path_, ": cannot open for writing: ", std::strerror(errno));
  write_record(detail::file_version_event(wall_time_now()));
  flush();
}

TensorBoardMonitor::~TensorBoardMonitor() {
  if (file_ != nullptr) std::fclose(file_);
}

void TensorBoardMonitor::write_events(const std::vector<ScalarEvent>& events) {
  const double now = wall_time_now();
  for (const ScalarEvent& e : events) write_record(detail::scalar_event(e, now));
}

void TensorBoardMonitor::flush() {
  DS_CHECK(std::fflush(file_) == 0, IoError, path_, ": write failed: ", std::strerror(errno));
}

void TensorBoardMonitor::write_record(const std::string& serialized_event) {
  const std::string record = detail::frame_record(serialized_event);
  DS_CHECK(std::fwrite(record.data(), 1, record.size(), file_) == record.size(), IoError, path_,
           ": write failed: ", std::strerror(errno));
}

}  // namespace deepshard::monitor
