// The two sides of the config schema: `Section` reads one JSON object into typed fields
// (types, ranges, "auto", unknown keys with suggestions, errors collected in `Diagnostics`), and
// `Writer` writes the same fields back as JSON. Each config section is written once as a template
// `visit_*(S& s, C& c, ...)` that calls s.field(...) per key; instantiated with Section it parses,
// with Writer it produces the resolved JSON. Private to the config layer.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "deepshard/config/ds_config.h"

namespace deepshard::config::detail {

// Errors and warnings of one file, each "<origin>: <key.path>: <message>".
class Diagnostics {
 public:
  Diagnostics(std::string origin, std::vector<std::string>* warnings)
      : origin_(std::move(origin)), warnings_(warnings) {}
  void error(const std::string& path, const std::string& message);
  void warn(const std::string& path, const std::string& message);
  size_t error_count() const { return errors_.size(); }
  // Throws one ConfigError listing every error, one per line; no-op without errors.
  void throw_if_errors() const;

 private:
  std::string line(const std::string& path, const std::string& message) const;
  std::string origin_;
  std::vector<std::string>* warnings_;
  std::vector<std::string> errors_;
};

// A range or choice constraint on a value. Returns "" when the value is fine, else what is wrong.
class Check {
 public:
  Check() = default;
  static Check at_least(double lo);            // v >= lo
  static Check above(double lo);               // v > lo
  static Check between(double lo, double hi);  // lo <= v <= hi
  static Check one_of(std::vector<std::string> choices, bool ignore_case = false);

  std::string operator()(double v) const;
  std::string operator()(const std::string& v) const;

 private:
  std::optional<double> lo_, hi_;
  bool lo_open_ = false;
  std::vector<std::string> choices_;
  bool ignore_case_ = false;
};

// What "auto" becomes for one key. `value` when known (from the run's train section or the model);
// without it the key keeps its DeepSpeed default when `keep_default`, else it is an error telling
// the user to set `source`. `must_match`: an explicit value that differs from `value` is an error
// (Hugging Face's Trainer rejects such mismatches too).
template <typename T>
struct Auto {
  std::optional<T> value;
  const char* source = nullptr;
  bool keep_default = true;
  bool must_match = false;
};

template <typename T>
struct Unwrap {
  using type = T;
};
template <typename T>
struct Unwrap<std::optional<T>> {
  using type = T;
};
template <typename T>
using Plain = typename Unwrap<T>::type;

// Converts `v` into `out`; returns "" or "expected <type>, found <v>". One overload per field type.
std::string convert(const nlohmann::json& v, bool& out);
std::string convert(const nlohmann::json& v, int& out);
std::string convert(const nlohmann::json& v, int64_t& out);
std::string convert(const nlohmann::json& v, uint64_t& out);
std::string convert(const nlohmann::json& v, double& out);
std::string convert(const nlohmann::json& v, std::string& out);
std::string convert(const nlohmann::json& v, std::array<double, 2>& out);
std::string convert(const nlohmann::json& v, std::vector<std::string>& out);
std::string convert(const nlohmann::json& v, std::map<std::string, std::string>& out);
std::string convert(const nlohmann::json& v, DType& out);
std::string convert(const nlohmann::json& v, OffloadDevice& out);

// The JSON form of a field value (the Writer side of convert).
nlohmann::json to_json_value(DType v);
nlohmann::json to_json_value(OffloadDevice v);
template <typename T>
nlohmann::json to_json_value(const T& v) {
  return nlohmann::json(v);
}
template <typename T>
nlohmann::json to_json_value(const std::optional<T>& v) {
  return v ? to_json_value(*v) : nlohmann::json(nullptr);
}

std::string describe(const nlohmann::json& v);  // a value as quoted in messages
// " (did you mean 'x'?)" with the closest candidate, or "" when none is close.
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);
std::string to_lower(std::string s);
std::string format_value(double v);  // 5e8 -> "500000000", 1e-8 -> "1e-08"
inline std::string format_value(int64_t v) { return std::to_string(v); }
inline std::string format_value(uint64_t v) { return std::to_string(v); }
inline std::string format_value(int v) { return std::to_string(v); }
inline std::string format_value(bool v) { return v ? "true" : "false"; }
inline std::string format_value(const std::string& v) { return "\"" + v + "\""; }

// Reads one JSON object (`json` may be null: an absent section, every field keeps its default).
class Section {
 public:
  Section(const nlohmann::json* json, std::string path, Diagnostics& diag)
      : json_(json), path_(std::move(path)), diag_(&diag) {}

  // A nested object; declares `key`. Absent or null: an empty section. Not an object: an error.
  Section child(const char* key);

  // Reads `key` into `out` if present. T may be std::optional<...> (null and absent: nullopt).
  template <typename T>
  void field(const char* key, T& out, const Check& check = {}, const Auto<Plain<T>>& rule = {});

  // The same setting under two names (DeepSpeed's "stage3_" aliases); both given is an error.
  template <typename T>
  void field_alias(const char* key, const char* alias, T& out, const Check& check = {},
                   const Auto<Plain<T>>& rule = {});

  void declare(const char* key) { known_.emplace_back(key); }  // a key handled by the caller
  void allow_unknown_keys() { open_ = true; }                  // keys passed on, not ours to check
  const nlohmann::json* get(const char* key) const;            // present and not null, else nullptr
  bool has(const char* key) const { return get(key) != nullptr; }
  bool is_auto(const char* key) const;
  std::string path_of(const std::string& key) const {
    return path_.empty() ? key : path_ + "." + key;
  }
  const std::string& path() const { return path_; }
  Diagnostics& diag() { return *diag_; }

  // Unknown keys: errors (or warnings when `warn_only`, as DeepSpeed ignores unknown top-level
  // keys), with the closest known key as a suggestion. Keys in `skip` are not reported.
  void finish(bool warn_only = false, const std::vector<std::string>& skip = {});

 private:
  template <typename T>
  void resolve_auto(const char* key, T& out, const Auto<Plain<T>>& rule);

  const nlohmann::json* json_;
  std::string path_;
  Diagnostics* diag_;
  std::vector<std::string> known_;
  bool open_ = false;
};

// Writes fields into one JSON object; the same calls as Section, checks and rules ignored.
class Writer {
 public:
  explicit Writer(nlohmann::json& node) : node_(&node) {
    if (!node_->is_object()) *node_ = nlohmann::json::object();
  }
  Writer child(const char* key) { return Writer((*node_)[key]); }
  template <typename T, typename... Ignored>
  void field(const char* key, const T& value, const Ignored&...) {
    (*node_)[key] = to_json_value(value);
  }
  template <typename T, typename... Ignored>
  void field_alias(const char* key, const char* /*alias*/, const T& value, const Ignored&...) {
    (*node_)[key] = to_json_value(value);
  }
  void declare(const char*) {}
  void allow_unknown_keys() {}
  void finish() {}

 private:
  nlohmann::json* node_;
};

// ---- Section templates

template <typename T>
void Section::resolve_auto(const char* key, T& out, const Auto<Plain<T>>& rule) {
  if (rule.value) {
    out = *rule.value;
  } else if (!rule.keep_default) {
    diag_->error(path_of(key), std::string("\"auto\" cannot be resolved: set ") + rule.source +
                                   " in the run file or give a number");
  } else if (rule.source == nullptr) {
    diag_->warn(path_of(key), "\"auto\" has no value to fill it; DeepSpeed's default applies");
  }
}

template <typename T>
void Section::field(const char* key, T& out, const Check& check, const Auto<Plain<T>>& rule) {
  known_.emplace_back(key);
  if (json_ == nullptr || !json_->is_object()) return;
  auto it = json_->find(key);
  if (it == json_->end()) return;
  constexpr bool kOptional = !std::is_same_v<T, Plain<T>>;
  if (it->is_null()) {
    if constexpr (kOptional) {
      out = std::nullopt;
    } else {
      diag_->error(path_of(key), "expected a value, found null");
    }
    return;
  }
  if (it->is_string() && it->template get_ref<const std::string&>() == "auto") {
    resolve_auto<T>(key, out, rule);
    return;
  }
  Plain<T> value{};
  if constexpr (kOptional) {
    if (out) value = *out;
  } else {
    value = out;
  }
  std::string problem = convert(*it, value);
  if constexpr (std::is_arithmetic_v<Plain<T>> && !std::is_same_v<Plain<T>, bool>) {
    if (problem.empty()) problem = check(static_cast<double>(value));
  } else if constexpr (std::is_same_v<Plain<T>, std::string>) {
    if (problem.empty()) problem = check(value);
  }
  if constexpr (requires { format_value(value); }) {
    if (problem.empty() && rule.must_match && rule.value && !(*rule.value == value)) {
      problem = format_value(value) + " contradicts " + rule.source + " = " +
                format_value(*rule.value) + " (write \"auto\" or make them equal)";
    }
  }
  if (!problem.empty()) {
    diag_->error(path_of(key), problem);
    return;
  }
  out = value;
}

template <typename T>
void Section::field_alias(const char* key, const char* alias, T& out, const Check& check,
                          const Auto<Plain<T>>& rule) {
  if (has(key) && has(alias)) {
    known_.emplace_back(key);
    known_.emplace_back(alias);
    diag_->error(path_of(alias), std::string("the same setting as ") + key + "; give only one");
    return;
  }
  if (has(alias)) {
    known_.emplace_back(key);
    field(alias, out, check, rule);
  } else {
    known_.emplace_back(alias);
    field(key, out, check, rule);
  }
}

}  // namespace deepshard::config::detail
