// The OpenBLAS kernels deepshard's ranks run with. OpenBLAS picks its kernels at load time from
// the CPU model it recognises; on a CPU model it does not know it falls back to a generic core
// (`Prescott`: SSE3 kernels, 4x slower fp32 matmuls than AVX-512 ones) even when the CPU has
// AVX-512 or AVX2. Then deepshard runs its ranks with the matching OPENBLAS_CORETYPE (SkylakeX,
// Haswell): the launcher puts it in the ranks' environment, and `deepshard train`/`doctor` run
// directly re-execute themselves once with it. A value the user set is never replaced. A core
// deepshard chose is checked numerically (sgemm/sgemv against a double-precision reference) in
// the process that uses it; if the check fails the process re-executes with OpenBLAS's own choice.
// Symbols are resolved with dlsym, so nothing here needs OpenBLAS at link time.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "platform/cpu_info.h"

namespace deepshard::platform {

// Set beside OPENBLAS_CORETYPE when deepshard chose the value (to verify it, and never to loop);
// "rejected:<core>" after the numeric check failed.
inline constexpr const char* kAutoCoretypeVar = "DEEPSHARD_OPENBLAS_CORETYPE_AUTO";

// openblas_get_corename() of the OpenBLAS loaded in this process, or else of the system's
// libblas.so.3 (the one libtorch loads; a launcher process has none loaded); "" when neither is
// OpenBLAS.
std::string openblas_corename();

// True for OpenBLAS cores without AVX2 kernels (Prescott, Core2, Nehalem, Sandybridge, ...).
bool is_generic_openblas_core(const std::string& core);

// The OPENBLAS_CORETYPE matching the CPU's vector ISA: "SkylakeX" (AVX-512), "Haswell" (AVX2 +
// FMA), or "" (nothing better than what OpenBLAS has for it).
std::string matching_openblas_coretype(const CpuInfo& cpu);

struct BlasChoice {
  std::string detected_core;    // what OpenBLAS picked in this process
  std::string env_coretype;     // OPENBLAS_CORETYPE as found ("" = unset)
  bool user_set = false;        // env_coretype was set by the user (not by deepshard)
  std::string coretype_to_set;  // non-empty: start the ranks with OPENBLAS_CORETYPE=<this>
  std::string reason;           // one line for logs and `deepshard doctor`
};

// The decision from its inputs (pure; tested on its own). `env_coretype` and `auto_marker` are the
// values of OPENBLAS_CORETYPE and kAutoCoretypeVar (nullptr = unset).
BlasChoice choose_openblas_coretype(const std::string& detected_core, const CpuInfo& cpu,
                                    const char* env_coretype, const char* auto_marker);

// OPENBLAS_CORETYPE and kAutoCoretypeVar as the process found them at start (nullopt = unset). The
// executable's option parsing (cli/process_options) and test mains read them and record them here;
// nothing in the libraries reads the environment. Never recorded: both unset.
struct BlasEnvironment {
  std::optional<std::string> coretype;
  std::optional<std::string> auto_marker;
};
void record_blas_environment(BlasEnvironment env);

// The decision for this process (its OpenBLAS, CPU and recorded environment).
BlasChoice current_blas_choice();

// Variables to add to the ranks' environment (empty when nothing needs setting).
std::map<std::string, std::string> blas_env_for_ranks(const BlasChoice& choice);

// The Fortran sgemm_ (column-major) of the BLAS loaded in this process (libtorch's), or nullptr.
using BlasSgemmFn = void (*)(const char*, const char*, const int*, const int*, const int*,
                             const float*, const float*, const int*, const float*, const int*,
                             const float*, float*, const int*);
BlasSgemmFn loaded_blas_sgemm();

// sgemm_/sgemv_ of the loaded BLAS on several shapes and transpositions against a double
// reference. False (with `detail` saying which case) on a wrong result or when no BLAS is loaded.
bool blas_numerically_correct(std::string* detail);

// For a command run directly (not under the launcher): if a better OPENBLAS_CORETYPE is due,
// re-executes /proc/self/exe with `argv` and it set (does not return). If deepshard chose the
// current value, checks it numerically and, when wrong, re-executes without it. Returns a line
// describing the BLAS kernels in use (for logs).
std::string ensure_blas_kernels(const std::vector<std::string>& argv);

}  // namespace deepshard::platform
