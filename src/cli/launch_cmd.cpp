// `deepshard launch`: parses the arguments (usage errors exit 2 through main), answers --help, and
// runs the job; the exit status is the launcher's (see launch/launcher.h). With --autotuning
// tune|run the autotuner (autotune/autotuner.h) runs the job's experiments instead.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "cli/commands.h"
#include "deepshard/autotune/autotuner.h"
#include "deepshard/launch/launcher.h"

namespace deepshard::cli {
namespace {

// Test hook (the executable installs it; the library never reads the environment):
// DEEPSHARD_TEST_TRIAL_MEMORY_LIMIT=NAME=BYTES[,NAME=BYTES...] gives those experiments that
// resident-memory limit instead of the budget (a tiny one forces the experiment out of memory).
void install_trial_memory_limits_for_tests(autotune::AutotuneRequest& request) {
  const char* spec = std::getenv("DEEPSHARD_TEST_TRIAL_MEMORY_LIMIT");
  if (spec == nullptr) return;
  std::string rest = spec;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string item = rest.substr(0, comma);
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
    const size_t eq = item.find('=');
    if (eq == std::string::npos) continue;
    request.memory_limit_overrides[item.substr(0, eq)] = std::atoll(item.c_str() + eq + 1);
  }
}

}  // namespace

int run_launch_command(const Args& args) {
  auto options_end = std::find(args.begin(), args.end(), "--");
  if (std::any_of(args.begin(), options_end,
                  [](const std::string& a) { return a == "--help" || a == "-h"; })) {
    std::fputs(launch::launch_usage().c_str(), stdout);
    return 0;
  }
  const launch::LaunchOptions options = launch::parse_launch_args(args);
  if (options.autotuning.empty()) return launch::launch(options);
  autotune::AutotuneRequest request;
  request.launch = options;
  request.deepshard_exe = std::filesystem::read_symlink("/proc/self/exe").string();
  install_trial_memory_limits_for_tests(request);
  return autotune::run_autotuning(request);
}

}  // namespace deepshard::cli
