// Reading this process's environment: the executable's part (the libraries read none, the
// rendezvous's and the launcher's variables aside).
#pragma once

#include <optional>
#include <string>

#include "platform/blas_kernels.h"
#include "util/environment.h"

namespace deepshard::cli {

using util::non_empty_env;

// OPENBLAS_CORETYPE and the marker deepshard sets beside it (platform/blas_kernels.h).
platform::BlasEnvironment blas_environment_from_process();

// The variable by which the user chose a heap policy already: the first of MALLOC_MMAP_THRESHOLD_,
// MALLOC_TRIM_THRESHOLD_, MALLOC_TOP_PAD_ set, else "GLIBC_TUNABLES (glibc.malloc)" when that holds
// a glibc.malloc entry, else "" (platform/heap_policy.h).
std::string users_heap_setting_from_process();

}  // namespace deepshard::cli
