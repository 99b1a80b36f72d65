// How a deepshard command ends on an error: the one place that catches them (the executable's
// dispatch and its launch-only front both run commands through it).
#pragma once

#include <functional>

namespace deepshard::cli {

// Runs `body` and returns its exit status; a UsageError prints "deepshard NAME: <what>" and a
// pointer to --help and returns 2, any other exception "deepshard NAME: error: <what>" and 1.
int run_guarded(const char* name, const std::function<int()>& body);

}  // namespace deepshard::cli
