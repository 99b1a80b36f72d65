// Implementation of ArgParser (arg_parser.h).
#include "cli/arg_parser.h"

#include <cmath>
#include <cstdio>

#include "deepshard/util/error.h"
#include "util/strings.h"

namespace deepshard::cli {

ArgParser::ArgParser(std::set<std::string> options, std::set<std::string> flags)
    : options_(std::move(options)), flags_(std::move(flags)) {}

void ArgParser::parse(const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) != 0 || a.size() == 2) {
      positional_.push_back(a);
      continue;
    }
    std::string name = a.substr(2);
    std::optional<std::string> value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (flags_.count(name)) {
      DS_CHECK(!value, UsageError, "option --", name, " takes no value");
      values_[name].push_back("true");
      continue;
    }
    if (!options_.count(name)) {
      std::vector<std::string> known(options_.begin(), options_.end());
      known.insert(known.end(), flags_.begin(), flags_.end());
      std::string guess = strings::closest_match(name, known);
      throw UsageError("unknown option --" + name +
                       (guess.empty() ? "" : " (did you mean --" + guess + "?)"));
    }
    if (!value) {
      DS_CHECK(i + 1 < args.size(), UsageError, "option --", name, " needs a value");
      value = args[++i];
    }
    values_[name].push_back(*value);
  }
}

bool ArgParser::print_help_if_asked(const char* usage) const {
  if (!has("help")) return false;
  std::fputs(usage, stdout);
  return true;
}

void ArgParser::reject_positional() const {
  DS_CHECK(positional_.empty(), UsageError, "unexpected argument '",
           positional_.empty() ? "" : positional_.front(), "'");
}

bool ArgParser::has(const std::string& name) const { return values_.count(name) > 0; }

std::optional<std::string> ArgParser::get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second.back();
}

std::vector<std::string> ArgParser::get_all(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

std::string ArgParser::require(const std::string& name) const {
  auto v = get(name);
  DS_CHECK(v.has_value(), UsageError, "missing required option --", name);
  return *v;
}

double parse_double(const std::string& option, const std::string& value) {
  size_t used = 0;
  double d = 0;
  try {
    d = std::stod(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  DS_CHECK(used == value.size() && !value.empty() && std::isfinite(d), UsageError, "option ",
           option, ": not a number: '", value, "'");
  return d;
}

int64_t parse_int(const std::string& option, const std::string& value) {
  const double d = parse_double(option, value);
  DS_CHECK(d == std::floor(d) && std::fabs(d) < 9.2e18, UsageError, "option ", option,
           ": not a whole number: '", value, "'");
  return static_cast<int64_t>(d);
}

double ArgParser::get_double(const std::string& name, double fallback) const {
  auto v = get(name);
  return v ? parse_double("--" + name, *v) : fallback;
}

int64_t ArgParser::get_int(const std::string& name, int64_t fallback) const {
  auto v = get(name);
  return v ? parse_int("--" + name, *v) : fallback;
}

}  // namespace deepshard::cli
