// Config files as JSON: reading (syntax errors with file:line:column, duplicate keys rejected
// with their key path, as DeepSpeed rejects them), deep merging, and `--set key.path=value`
// overrides.
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "deepshard/config/loader.h"
#include "deepshard/util/error.h"
#include "util/strings.h"

namespace deepshard::config {

using nlohmann::json;

namespace {

// Tracks where the parser is (object keys, array indices) to name duplicate keys by path.
class DuplicateKeyFinder {
 public:
  bool on_event(json::parse_event_t event, const json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        frames_.emplace_back();
        frames_.back().array = event == json::parse_event_t::array_start;
        break;
      case json::parse_event_t::key: {
        const std::string& key = parsed.get_ref<const std::string&>();
        Frame& top = frames_.back();
        if (!top.keys.insert(key).second) duplicates_.push_back(path() + key);
        top.key = key;
        break;
      }
      case json::parse_event_t::value:
        if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        frames_.pop_back();
        if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
        break;
    }
    return true;
  }
  const std::vector<std::string>& duplicates() const { return duplicates_; }

 private:
  struct Frame {
    bool array = false;
    std::set<std::string> keys;
    std::string key;
    size_t index = 0;
  };
  // The path of the innermost open container, ending with "." when inside an object.
  std::string path() const {
    std::string out;
    for (size_t i = 0; i + 1 < frames_.size(); ++i) {
      const Frame& f = frames_[i];
      out += f.array ? "[" + std::to_string(f.index) + "]" : (out.empty() ? "" : ".") + f.key;
    }
    return out.empty() ? out : out + ".";
  }
  std::vector<Frame> frames_;
  std::vector<std::string> duplicates_;
};

// "file:line:column: ..." for a syntax error at byte offset `byte` (1-based, as nlohmann reports
// the last character read; trailing whitespace is skipped so the position points at the token).
std::string syntax_error(const std::string& path, const std::string& text,
                         const json::parse_error& e) {
  size_t offset = e.byte > 0 ? std::min<size_t>(e.byte - 1, text.size()) : 0;
  while (offset > 0 && offset <= text.size() &&
         (offset == text.size() || std::isspace(static_cast<unsigned char>(text[offset])))) {
    --offset;
  }
  size_t line = 1, column = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  // nlohmann's text after its own "parse error at line L, column C: ".
  std::string what = e.what();
  size_t at = what.find("column ");
  size_t colon = at == std::string::npos ? at : what.find(": ", at);
  std::string detail = colon == std::string::npos ? what : what.substr(colon + 2);
  return path + ":" + std::to_string(line) + ":" + std::to_string(column) +
         ": JSON syntax error: " + detail;
}

}  // namespace

json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("cannot read " + path + ": " + std::strerror(errno));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();

  DuplicateKeyFinder finder;
  json result;
  try {
    result = json::parse(
        text,
        [&finder](int, json::parse_event_t event, json& parsed) {
          return finder.on_event(event, parsed);
        },
        /*allow_exceptions=*/true, /*ignore_comments=*/true);
  } catch (const json::parse_error& e) {
    throw ConfigError(syntax_error(path, text, e));
  } catch (const json::exception& e) {
    throw ConfigError(path + ": JSON error: " + e.what());
  }
  if (!finder.duplicates().empty()) {
    std::string message;
    for (const auto& key : finder.duplicates()) {
      message += (message.empty() ? "" : "\n") + path + ": " + key + ": duplicate key";
    }
    throw ConfigError(message);
  }
  return result;
}

void merge_json(json& base, const json& overlay) {
  if (!base.is_object() || !overlay.is_object()) {
    base = overlay;
    return;
  }
  for (const auto& item : overlay.items()) merge_json(base[item.key()], item.value());
}

void apply_override(json& config, const std::string& assignment) {
  size_t eq = assignment.find('=');
  DS_CHECK(eq != std::string::npos, ConfigError, "--set ", assignment,
           ": expected key.path=value (for example zero_optimization.stage=2)");
  const std::string path = strings::trim(assignment.substr(0, eq));
  const std::string text = assignment.substr(eq + 1);
  DS_CHECK(!path.empty(), ConfigError, "--set ", assignment, ": the key path is empty");
  std::vector<std::string> keys = strings::split(path, '.');
  for (const auto& key : keys) {
    DS_CHECK(!key.empty(), ConfigError, "--set ", assignment, ": empty key in path '", path, "'");
  }

  json value;
  try {
    value = json::parse(text);
  } catch (const json::exception&) {
    value = text;  // not JSON: a plain string
  }

  if (!config.is_object()) config = json::object();
  json* node = &config;
  std::string walked;
  for (size_t i = 0; i + 1 < keys.size(); ++i) {
    walked += (walked.empty() ? "" : ".") + keys[i];
    json& next = (*node)[keys[i]];
    if (next.is_null()) next = json::object();
    DS_CHECK(next.is_object(), ConfigError, "--set ", assignment, ": ", walked,
             " is not an object (it is ", next.dump(), ")");
    node = &next;
  }
  (*node)[keys.back()] = std::move(value);
}

}  // namespace deepshard::config
