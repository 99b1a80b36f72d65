// Reading one environment variable. Called only where the process's settings are read once: the
// executable's and the Python module's options (cli/environment.h) and `deepshard launch`'s
// (launch/launcher.h); the rendezvous reads its own (comm/rendezvous.cpp).
#pragma once

#include <optional>
#include <string>

namespace deepshard::util {

// The variable's value; nullopt when it is unset or empty.
std::optional<std::string> non_empty_env(const char* name);

}  // namespace deepshard::util
