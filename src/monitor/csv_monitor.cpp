// Implementation of csv_monitor.h.
#include "monitor/csv_monitor.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "deepshard/util/error.h"

namespace deepshard::monitor {
namespace {

// A CSV field, quoted as Python's csv module does when it holds a separator, quote or newline.
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

}  // namespace

CsvMonitor::CsvMonitor(const std::string& log_dir) : log_dir_(log_dir) {
  std::error_code ec;
  std::filesystem::create_directories(log_dir, ec);
  DS_CHECK(!ec, IoError, log_dir, ": cannot create the csv_monitor directory: ", ec.message());
}

CsvMonitor::~CsvMonitor() {
  for (auto& [name, file] : files_) std::fclose(file);
}

std::string CsvMonitor::file_name(const std::string& tag) {
  std::string name = tag;
  for (char& c : name)
    if (c == '/' || c == ' ') c = '_';
  return name + ".csv";
}

std::string CsvMonitor::format_value(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, value);
  std::string s(buf, res.ptr);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

FILE* CsvMonitor::file_for(const std::string& tag) {
  const std::string name = file_name(tag);
  auto it = files_.find(name);
  if (it != files_.end()) return it->second;
  const std::string path = (std::filesystem::path(log_dir_) / name).string();
  FILE* f = std::fopen(path.c_str(), "a");
  DS_CHECK(f != nullptr, IoError, path, ": cannot open for appending: ", std::strerror(errno));
  files_[name] = f;
  if (std::ftell(f) == 0) {  // a new file: DeepSpeed's header, the tag's last part
    const std::string header = tag.substr(tag.find_last_of('/') + 1);
    std::fprintf(f, "step,%s\r\n", csv_field(header).c_str());
  }
  return f;
}

void CsvMonitor::write_events(const std::vector<ScalarEvent>& events) {
  for (const ScalarEvent& e : events) {
    FILE* f = file_for(e.tag);
    const int n = std::fprintf(f, "%lld,%s\r\n", static_cast<long long>(e.step),
                               format_value(e.value).c_str());
    DS_CHECK(n > 0, IoError, log_dir_, "/", file_name(e.tag),
             ": write failed: ", std::strerror(errno));
  }
}

void CsvMonitor::flush() {
  for (auto& [name, file] : files_)
    DS_CHECK(std::fflush(file) == 0, IoError, log_dir_, "/", name,
             ": write failed: ", std::strerror(errno));
}

}  // namespace deepshard::monitor
