// Reading this process's environment: the executable's part (the libraries read none, the
// rendezvous's and the launcher's variables aside).
#pragma once

#include <optional>
#include <string>

#include "platform/blas_kernels.h"

namespace deepshard::cli {

// The variable's value; nullopt when it is unset or empty.
std::optional<std::string> non_empty_env(const char* name);

// OPENBLAS_CORETYPE and the marker deepshard sets beside it (platform/blas_kernels.h).
platform::BlasEnvironment blas_environment_from_process();

}  // namespace deepshard::cli
