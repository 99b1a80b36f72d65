// The `deepshard` executable. `deepshard launch` runs here, in a process that loads no tensor
// library: a launcher linked with libtorch spends about half a second of CPU loading it (and the
// ~290 shared libraries Debian's build pulls in) before it starts a rank. Every other command,
// and `launch --autotuning` (the tuner trains), replaces this process (execv: the same pid,
// signals and exit status) with deepshard-core, the full executable beside this one.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/environment.h"
#include "cli/guarded_command.h"
#include "launch/launcher.h"

namespace {

int run_core(char** argv) {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  const std::string core = (error ? std::filesystem::path(argv[0]) : self)
                               .parent_path()
                               .append("deepshard-core")
                               .string();
  ::execv(core.c_str(), argv);
  std::fprintf(stderr,
               "deepshard: cannot run %s (the executable of every command but launch): %s\n",
               core.c_str(), std::strerror(errno));
  return 127;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "launch") != 0) return run_core(argv);
  const std::vector<std::string> args(argv + 2, argv + argc);
  bool autotuning = false;
  const int status = deepshard::cli::run_guarded("launch", [&] {
    if (deepshard::launch::launch_help_requested(args)) {
      std::fputs(deepshard::launch::launch_usage().c_str(), stdout);
      return 0;
    }
    const deepshard::launch::LaunchOptions options = deepshard::launch::parse_launch_args(args);
    autotuning = !options.autotuning.empty();
    if (autotuning) return 0;
    deepshard::platform::record_blas_environment(deepshard::cli::blas_environment_from_process());
    return deepshard::launch::launch(options);
  });
  return autotuning ? run_core(argv) : status;
}
