// Process-wide logging to stderr, one line per message: "[rank R] info: ..." once the rank is set
// (after rendezvous; the launcher relays such lines without adding its own "[rank R] " again),
// "deepshard: info: ..." before.
#pragma once

#include <optional>
#include <string>

#include "deepshard/util/error.h"

namespace deepshard::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

void set_rank(int rank);
void set_level(Level level);
// The level a name stands for: debug, info, warn or warning, error, critical (= error): the names
// of DEEPSHARD_LOG_LEVEL and of DeepSpeed's log_level key. nullopt for any other name.
std::optional<Level> parse_level(const std::string& name);
void write(Level level, const std::string& message);

template <typename... Args>
void info(const Args&... args) {
  write(Level::kInfo, detail::concat(args...));
}
template <typename... Args>
void warn(const Args&... args) {
  write(Level::kWarn, detail::concat(args...));
}
template <typename... Args>
void error(const Args&... args) {
  write(Level::kError, detail::concat(args...));
}
template <typename... Args>
void debug(const Args&... args) {
  write(Level::kDebug, detail::concat(args...));
}

}  // namespace deepshard::log
