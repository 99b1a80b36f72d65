// `deepshard launch`: parses the arguments (usage errors exit 2 through main), answers --help, and
// runs the job; the exit status is the launcher's (see launch/launcher.h). With --autotuning
// tune|run the autotuner (autotune/autotuner.h) runs the job's experiments instead.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>

#include "cli/commands.h"
#include "deepshard/autotune/autotuner.h"
#include "deepshard/launch/launcher.h"

namespace deepshard::cli {

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
  return autotune::run_autotuning(request);
}

}  // namespace deepshard::cli
