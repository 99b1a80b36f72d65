// A small parser for subcommand arguments: `--name value`, `--name=value`, repeatable options,
// boolean flags and positional arguments. Unknown options and missing values are UsageErrors
// that name the option.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace deepshard::cli {

// `value` of option `option` (named with its dashes in the UsageError) as a finite number, or as
// a whole number (forms like 1.3e9 accepted).
double parse_double(const std::string& option, const std::string& value);
int64_t parse_int(const std::string& option, const std::string& value);

class ArgParser {
 public:
  // `options`: names (without --) that take a value; `flags`: names that take none.
  ArgParser(std::set<std::string> options, std::set<std::string> flags);
  void parse(const std::vector<std::string>& args);

  // When --help was given: prints `usage` to stdout and returns true (the command returns 0).
  bool print_help_if_asked(const char* usage) const;
  // UsageError naming the first positional argument, for commands that take none.
  void reject_positional() const;

  bool has(const std::string& name) const;                        // option given, or flag set
  std::optional<std::string> get(const std::string& name) const;  // last value given
  std::vector<std::string> get_all(const std::string& name) const;
  std::string require(const std::string& name) const;  // UsageError when absent
  const std::vector<std::string>& positional() const { return positional_; }

  // Numeric values, accepting forms like 1.3e9 for integers. UsageError names the option.
  int64_t get_int(const std::string& name, int64_t fallback) const;
  double get_double(const std::string& name, double fallback) const;

 private:
  std::set<std::string> options_, flags_;
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positional_;
};

}  // namespace deepshard::cli
