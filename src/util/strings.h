// Small string helpers shared by the config and CLI layers: edit distance for "did you mean"
// suggestions, trimming, splitting and the first line of a message.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace deepshard::strings {

// Levenshtein distance between a and b.
size_t edit_distance(std::string_view a, std::string_view b);

// The candidate closest to `word`, or "" when none is close enough to be a plausible typo.
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);

std::vector<std::string> split(std::string_view s, char sep);
std::string trim(std::string_view s);

// The text before the first newline (an exception's message without c10::Error's backtrace).
std::string first_line(std::string_view s);

// The whole of `s` as a decimal int (no sign-only, no trailing characters, in range), else nullopt.
std::optional<int> parse_int(std::string_view s);

}  // namespace deepshard::strings
