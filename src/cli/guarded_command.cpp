// run_guarded (guarded_command.h).
#include "cli/guarded_command.h"

#include <cstdio>
#include <exception>

#include "deepshard/util/error.h"

namespace deepshard::cli {

int run_guarded(const char* name, const std::function<int()>& body) {
  try {
    return body();
  } catch (const UsageError& e) {
    std::fprintf(stderr, "deepshard %s: %s\n(see: deepshard %s --help)\n", name, e.what(), name);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "deepshard %s: error: %s\n", name, e.what());
    return 1;
  }
}

}  // namespace deepshard::cli
