// Reading the environment (environment.h).
#include "cli/environment.h"

#include <string_view>

namespace deepshard::cli {

platform::BlasEnvironment blas_environment_from_process() {
  return {non_empty_env("OPENBLAS_CORETYPE"), non_empty_env(platform::kAutoCoretypeVar)};
}

std::string users_heap_setting_from_process() {
  for (const char* name : {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_"}) {
    if (non_empty_env(name)) return name;
  }
  const std::optional<std::string> tunables = non_empty_env("GLIBC_TUNABLES");
  if (tunables && std::string_view(*tunables).find("glibc.malloc.") != std::string_view::npos)
    return "GLIBC_TUNABLES (glibc.malloc)";
  return "";
}

}  // namespace deepshard::cli
