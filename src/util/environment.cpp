// Reading one environment variable (environment.h).
#include "util/environment.h"

#include <cstdlib>

namespace deepshard::util {

std::optional<std::string> non_empty_env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

}  // namespace deepshard::util
