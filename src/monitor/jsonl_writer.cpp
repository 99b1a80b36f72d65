// Implementation of jsonl_writer.h.
#include "monitor/jsonl_writer.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "deepshard/util/error.h"

namespace deepshard::monitor {

JsonlWriter::JsonlWriter(const std::string& path, bool append) : path_(path) {
  file_ = std::fopen(path.c_str(), append ? "a" : "w");
  DS_CHECK(file_ != nullptr, IoError, path, ": cannot open for writing: ", std::strerror(errno));
}

namespace {
// Strings may hold bytes that are not UTF-8 (a text sample decoded from byte tokens): they are
// written as U+FFFD instead of failing the write (nlohmann's default throws).
constexpr auto kReplaceInvalidUtf8 = nlohmann::json::error_handler_t::replace;
}  // namespace

JsonlWriter::~JsonlWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void JsonlWriter::write(const nlohmann::json& record) {
  std::string line = record.dump(-1, ' ', false, kReplaceInvalidUtf8) + "\n";
  bool ok =
      std::fwrite(line.data(), 1, line.size(), file_) == line.size() && std::fflush(file_) == 0;
  DS_CHECK(ok, IoError, path_, ": write failed: ", std::strerror(errno));
}

void write_json_file(const std::string& path, const nlohmann::json& value) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    DS_CHECK(out.good(), IoError, tmp, ": cannot open for writing: ", std::strerror(errno));
    out << value.dump(2, ' ', false, kReplaceInvalidUtf8) << "\n";
    out.flush();
    DS_CHECK(out.good(), IoError, tmp, ": write failed");
  }
  DS_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, IoError, path, ": cannot rename from ", tmp,
           ": ", std::strerror(errno));
}

}  // namespace deepshard::monitor
