// The subcommands of the deepshard executable. Each takes the arguments after its name and returns
// the process exit status; it throws UsageError for bad arguments (main prints usage) and other
// deepshard::Error types for failures (main prints the message). Each answers --help.
#pragma once

#include <string>
#include <vector>

namespace deepshard::cli {

using Args = std::vector<std::string>;

// The whole command line (argv[1] names the command); returns the exit status. dispatch.cpp.
int run_cli(int argc, char** argv);

int run_launch_command(const Args& args);        // launch_cmd.cpp
int run_train_command(const Args& args);         // train_cmd.cpp
int run_config_command(const Args& args);        // config_cmd.cpp: `config check FILE...`
int run_estimate_command(const Args& args);      // estimate_cmd.cpp
int run_prepare_data_command(const Args& args);  // prepare_data_cmd.cpp
int run_generate_command(const Args& args);      // generate_cmd.cpp
int run_convert_command(const Args& args);       // convert_cmd.cpp
int run_report_command(const Args& args);        // report_cmd.cpp
int run_doctor_command(const Args& args);        // doctor_cmd.cpp

// The tag directory a checkpoint path names: `path` itself if it holds a manifest.json, else
// <path>/<tag> ("" = <path>/latest's tag). convert_cmd.cpp.
std::string checkpoint_tag_dir(const std::string& path, const std::string& tag);

}  // namespace deepshard::cli
