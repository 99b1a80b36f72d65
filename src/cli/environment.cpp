// Reading the environment (environment.h).
#include "cli/environment.h"

#include <cstdlib>

namespace deepshard::cli {

std::optional<std::string> non_empty_env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

platform::BlasEnvironment blas_environment_from_process() {
  return {non_empty_env("OPENBLAS_CORETYPE"), non_empty_env(platform::kAutoCoretypeVar)};
}

}  // namespace deepshard::cli
