// The subcommands of the deepshard executable. Each takes the arguments after its name and returns
// the process exit status; it throws UsageError for bad arguments (main prints usage) and other
// deepshard::Error types for failures (main prints the message). Each answers --help.
#pragma once

#include <string>
#include <vector>

namespace deepshard::cli {

using Args = std::vector<std::string>;

int run_launch_command(const Args& args);        // launch_cmd.cpp
int run_train_command(const Args& args);         // train_cmd.cpp
int run_config_command(const Args& args);        // config_cmd.cpp: `config check FILE...`
int run_estimate_command(const Args& args);      // estimate_cmd.cpp
int run_prepare_data_command(const Args& args);  // prepare_data_cmd.cpp
int run_generate_command(const Args& args);      // generate_cmd.cpp

}  // namespace deepshard::cli
