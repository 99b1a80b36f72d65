// `deepshard launch`: parses the arguments (usage errors exit 2 through main), answers --help, and
// runs the job; the exit status is the launcher's (see launch/launcher.h). With --autotuning
// tune|run the autotuner (autotune/autotuner.h) runs the job's experiments instead.
#include <cstdio>
#include <filesystem>
#include <string>

#include "autotune/autotuner.h"
#include "cli/commands.h"
#include "launch/launcher.h"

namespace deepshard::cli {

int run_launch_command(const Args& args) {
  if (launch::launch_help_requested(args)) {
    std::fputs(launch::launch_usage().c_str(), stdout);
    return 0;
  }
  const launch::LaunchOptions options = launch::parse_launch_args(args);
  if (options.autotuning.empty()) return launch::launch(options);
  autotune::AutotuneRequest request;
  request.launch = options;
  // The experiments' launcher: the `deepshard` front beside this executable when there is one (it
  // starts their ranks without loading libtorch itself), else this executable.
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe");
  const std::filesystem::path front = self.parent_path() / "deepshard";
  request.deepshard_exe = std::filesystem::exists(front) ? front.string() : self.string();
  return autotune::run_autotuning(request);
}

}  // namespace deepshard::cli
