// Implementation of deepshard::log: one line per message, written with a single fprintf so
// lines of concurrent threads do not interleave.
#include "util/log.h"

#include <atomic>
#include <cstdio>

namespace deepshard::log {
namespace {
std::atomic<int> g_rank{-1};
std::atomic<int> g_level{static_cast<int>(Level::kInfo)};
const char* level_name(Level level) {
  switch (level) {
    case Level::kDebug:
      return "debug";
    case Level::kInfo:
      return "info";
    case Level::kWarn:
      return "warning";
    case Level::kError:
      return "error";
  }
  return "";
}
}  // namespace

std::optional<Level> parse_level(const std::string& name) {
  if (name == "debug") return Level::kDebug;
  if (name == "info") return Level::kInfo;
  if (name == "warn" || name == "warning") return Level::kWarn;
  if (name == "error" || name == "critical") return Level::kError;
  return std::nullopt;
}

void set_rank(int rank) { g_rank = rank; }
void set_level(Level level) { g_level = static_cast<int>(level); }

void write(Level level, const std::string& message) {
  if (static_cast<int>(level) < g_level.load()) return;
  int rank = g_rank.load();
  // The launcher's prefix (launch/rank_output.h), so that relayed lines carry it once.
  if (rank >= 0)
    std::fprintf(stderr, "[rank %d] %s: %s\n", rank, level_name(level), message.c_str());
  else
    std::fprintf(stderr, "deepshard: %s: %s\n", level_name(level), message.c_str());
  std::fflush(stderr);
}

}  // namespace deepshard::log
