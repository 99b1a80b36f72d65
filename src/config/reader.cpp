// The non-template part of the config reader (reader.h): diagnostics, checks, JSON-to-field
// conversions with their messages, and the unknown-key report.
#include "config/reader.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

#include "deepshard/util/error.h"
#include "util/strings.h"

namespace deepshard::config::detail {

using nlohmann::json;

std::string to_lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  std::string suggestion = strings::closest_match(word, candidates);
  return suggestion.empty() ? "" : " (did you mean '" + suggestion + "'?)";
}

// ---- Diagnostics

std::string Diagnostics::line(const std::string& path, const std::string& message) const {
  return origin_ + ": " + (path.empty() ? "(top level)" : path) + ": " + message;
}

void Diagnostics::error(const std::string& path, const std::string& message) {
  errors_.push_back(line(path, message));
}

void Diagnostics::warn(const std::string& path, const std::string& message) {
  if (warnings_ != nullptr) warnings_->push_back(line(path, message));
}

void Diagnostics::throw_if_errors() const {
  if (errors_.empty()) return;
  std::string message;
  for (const auto& e : errors_) message += (message.empty() ? "" : "\n") + e;
  throw ConfigError(message);
}

// ---- Check

Check Check::at_least(double lo) {
  Check c;
  c.lo_ = lo;
  return c;
}

Check Check::above(double lo) {
  Check c;
  c.lo_ = lo;
  c.lo_open_ = true;
  return c;
}

Check Check::between(double lo, double hi) {
  Check c;
  c.lo_ = lo;
  c.hi_ = hi;
  return c;
}

Check Check::one_of(std::vector<std::string> choices, bool ignore_case) {
  Check c;
  c.choices_ = std::move(choices);
  c.ignore_case_ = ignore_case;
  return c;
}

std::string Check::operator()(double v) const {
  bool low = lo_ && (lo_open_ ? !(v > *lo_) : !(v >= *lo_));
  bool high = hi_ && !(v <= *hi_);
  if (!low && !high) return "";
  if (hi_)
    return format_value(v) + " is out of range: must be between " + format_value(*lo_) + " and " +
           format_value(*hi_);
  return format_value(v) + " is out of range: must be " + (lo_open_ ? "> " : ">= ") +
         format_value(*lo_);
}

std::string Check::operator()(const std::string& v) const {
  if (choices_.empty()) return "";
  auto same = [&](const std::string& c) {
    return ignore_case_ ? to_lower(c) == to_lower(v) : c == v;
  };
  if (std::any_of(choices_.begin(), choices_.end(), same)) return "";
  std::string list;
  for (const auto& c : choices_) list += (list.empty() ? "\"" : ", \"") + c + "\"";
  return "\"" + v + "\" is not one of " + list + did_you_mean(v, choices_);
}

// ---- Messages

std::string describe(const json& v) {
  switch (v.type()) {
    case json::value_t::object:
      return "an object";
    case json::value_t::array: {
      std::string text = v.dump();
      return text.size() <= 40 ? "a list " + text : "a list of " + std::to_string(v.size());
    }
    case json::value_t::string: {
      std::string text = v.dump();
      return text.size() <= 60 ? "the string " + text : "a string";
    }
    default:
      return v.dump();
  }
}

std::string format_value(double v) {
  if (std::isfinite(v) && std::trunc(v) == v && std::fabs(v) < 1e15) {
    return std::to_string(static_cast<int64_t>(v));
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.12g", v);
  return buf;
}

namespace {

std::string expected(const char* what, const json& v) {
  std::string message = std::string("expected ") + what + ", found " + describe(v);
  std::string kind = what;
  bool numeric = kind.find("number") != std::string::npos || kind.find("integer") != kind.npos;
  if (v.is_boolean() && numeric) message += " (booleans are not numbers)";
  return message;
}

// Integers: JSON integers, or floats with an integral value (real configs write 5e8).
std::string convert_integer(const json& v, int64_t lo, int64_t hi, int64_t& out) {
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(hi)) return expected("an integer in range", v);
    out = static_cast<int64_t>(u);
  } else if (v.is_number_integer()) {
    out = v.get<int64_t>();
  } else if (v.is_number_float()) {
    double d = v.get<double>();
    // 2^63 is exactly representable; anything at or beyond it does not fit an int64.
    if (!std::isfinite(d) || std::trunc(d) != d || d >= 9223372036854775808.0 ||
        d < -9223372036854775808.0) {
      return expected("an integer", v);
    }
    out = static_cast<int64_t>(d);
  } else {
    return expected("an integer", v);
  }
  if (out < lo || out > hi) {
    return "integer " + std::to_string(out) + " does not fit (must be between " +
           std::to_string(lo) + " and " + std::to_string(hi) + ")";
  }
  return "";
}

}  // namespace

// ---- Conversions

std::string convert(const json& v, bool& out) {
  if (!v.is_boolean()) return expected("a boolean (true or false)", v);
  out = v.get<bool>();
  return "";
}

std::string convert(const json& v, int& out) {
  int64_t wide = 0;
  std::string problem = convert_integer(v, INT32_MIN, INT32_MAX, wide);
  if (problem.empty()) out = static_cast<int>(wide);
  return problem;
}

std::string convert(const json& v, int64_t& out) {
  return convert_integer(v, INT64_MIN, INT64_MAX, out);
}

std::string convert(const json& v, uint64_t& out) {
  if (v.is_number_unsigned()) {
    out = v.get<uint64_t>();
    return "";
  }
  int64_t wide = 0;
  std::string problem = convert_integer(v, 0, INT64_MAX, wide);
  if (problem.empty()) out = static_cast<uint64_t>(wide);
  return problem;
}

std::string convert(const json& v, double& out) {
  if (!v.is_number()) return expected("a number", v);
  double d = v.get<double>();
  if (!std::isfinite(d)) return expected("a finite number", v);
  out = d;
  return "";
}

std::string convert(const json& v, std::string& out) {
  if (!v.is_string()) return expected("a string", v);
  out = v.get<std::string>();
  return "";
}

std::string convert(const json& v, std::array<double, 2>& out) {
  if (!v.is_array() || v.size() != 2 || !v[0].is_number() || !v[1].is_number()) {
    return expected("a list of 2 numbers", v);
  }
  out = {v[0].get<double>(), v[1].get<double>()};
  return "";
}

std::string convert(const json& v, std::vector<std::string>& out) {
  bool ok =
      v.is_array() && std::all_of(v.begin(), v.end(), [](const json& e) { return e.is_string(); });
  if (!ok) return expected("a list of strings", v);
  out = v.get<std::vector<std::string>>();
  return "";
}

std::string convert(const json& v, std::map<std::string, std::string>& out) {
  bool ok =
      v.is_object() && std::all_of(v.begin(), v.end(), [](const json& e) { return e.is_string(); });
  if (!ok) return expected("an object of strings", v);
  out = v.get<std::map<std::string, std::string>>();
  return "";
}

std::string convert(const json& v, DType& out) {
  // DeepSpeed's DtypeEnum spellings.
  if (v.is_string()) {
    std::string s = to_lower(v.get<std::string>());
    if (s == "fp32" || s == "float32" || s == "float" || s == "torch.float32") {
      out = DType::kFp32;
      return "";
    }
    if (s == "fp16" || s == "float16" || s == "half" || s == "torch.float16") {
      out = DType::kFp16;
      return "";
    }
    if (s == "bf16" || s == "bfloat16" || s == "torch.bfloat16") {
      out = DType::kBf16;
      return "";
    }
  }
  return expected("one of \"fp32\", \"fp16\", \"bf16\"", v);
}

std::string convert(const json& v, OffloadDevice& out) {
  if (v.is_string()) {
    std::string s = v.get<std::string>();
    if (s == "none") out = OffloadDevice::kNone;
    if (s == "cpu") out = OffloadDevice::kCpu;
    if (s == "nvme") out = OffloadDevice::kNvme;
    if (s == "none" || s == "cpu" || s == "nvme") return "";
  }
  return expected("one of \"none\", \"cpu\", \"nvme\"", v);
}

json to_json_value(DType v) { return to_string(v); }
json to_json_value(OffloadDevice v) { return to_string(v); }

// ---- Section

const json* Section::get(const char* key) const {
  if (json_ == nullptr || !json_->is_object()) return nullptr;
  auto it = json_->find(key);
  return it == json_->end() || it->is_null() ? nullptr : &*it;
}

bool Section::is_auto(const char* key) const {
  const json* v = get(key);
  return v != nullptr && v->is_string() && v->get_ref<const std::string&>() == "auto";
}

Section Section::child(const char* key) {
  known_.emplace_back(key);
  const json* v = get(key);
  if (v != nullptr && !v->is_object()) {
    diag_->error(path_of(key), "expected an object, found " + describe(*v));
    v = nullptr;
  }
  return Section(v, path_of(key), *diag_);
}

void Section::finish(bool warn_only, const std::vector<std::string>& skip) {
  if (open_ || json_ == nullptr || !json_->is_object()) return;
  for (const auto& item : json_->items()) {
    const std::string& key = item.key();
    if (std::find(known_.begin(), known_.end(), key) != known_.end()) continue;
    if (std::find(skip.begin(), skip.end(), key) != skip.end()) continue;
    std::vector<std::string> candidates = known_;
    candidates.insert(candidates.end(), skip.begin(), skip.end());
    std::string hint = did_you_mean(key, candidates);
    if (warn_only) {
      diag_->warn(path_of(key), "unknown key, ignored as DeepSpeed does" + hint);
    } else {
      diag_->error(path_of(key), "unknown key" + hint);
    }
  }
}

}  // namespace deepshard::config::detail
