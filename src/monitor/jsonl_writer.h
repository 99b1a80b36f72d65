// Appends one JSON object per line to a file (metrics.jsonl), flushed after every line so a
// crashed run keeps what it logged.
#pragma once

#include <cstdio>
#include <nlohmann/json_fwd.hpp>
#include <string>

namespace deepshard::monitor {

class JsonlWriter {
 public:
  // Truncates `path` unless `append`. Throws IoError naming the file.
  explicit JsonlWriter(const std::string& path, bool append = false);
  ~JsonlWriter();
  JsonlWriter(const JsonlWriter&) = delete;
  JsonlWriter& operator=(const JsonlWriter&) = delete;
  void write(const nlohmann::json& record);

 private:
  std::string path_;
  FILE* file_ = nullptr;
};

// Writes `value` as pretty JSON to `path` atomically (temp file + rename). Throws IoError.
void write_json_file(const std::string& path, const nlohmann::json& value);

}  // namespace deepshard::monitor
