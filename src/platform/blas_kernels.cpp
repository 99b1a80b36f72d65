// Choosing and checking OpenBLAS's kernels (blas_kernels.h).
#include "platform/blas_kernels.h"

#include <dlfcn.h>
#include <strings.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "deepshard/util/error.h"
#include "platform/sgemm_check.h"

namespace deepshard::platform {
namespace {

BlasEnvironment& recorded_environment() {
  static BlasEnvironment env;
  return env;
}

const char* c_str_or_null(const std::optional<std::string>& value) {
  return value ? value->c_str() : nullptr;
}

// The Fortran BLAS entry points libtorch calls (column-major).
using SgemvFn = void (*)(const char*, const int*, const int*, const float*, const float*,
                         const int*, const float*, const int*, const float*, float*, const int*);

bool check_sgemv(SgemvFn sgemv, int m, int n, bool trans, std::string* detail) {
  const auto a = sgemm_check::random_values(size_t(m) * n, 3u + m);
  const int len_x = trans ? m : n, len_y = trans ? n : m, inc = 1;
  const auto x = sgemm_check::random_values(size_t(len_x), 4u + n);
  std::vector<float> y(size_t(len_y), 0.5f);
  const float alpha = 1.0f, beta = 0.0f;
  sgemv(trans ? "T" : "N", &m, &n, &alpha, a.data(), &m, x.data(), &inc, &beta, y.data(), &inc);
  for (int i = 0; i < len_y; ++i) {
    double sum = 0, scale = 0;
    for (int p = 0; p < len_x; ++p) {
      const double v =
          trans ? a[size_t(i) * m + p] * double(x[p]) : a[size_t(p) * m + i] * double(x[p]);
      sum += v;
      scale += std::fabs(v);
    }
    if (!(std::fabs(y[i] - sum) <= 1e-4 * scale + 1e-6)) {
      *detail = detail::concat("sgemv ", trans ? 'T' : 'N', " m=", m, " n=", n, ": y[", i,
                               "] = ", y[i], ", expected ", sum);
      return false;
    }
  }
  return true;
}

[[noreturn]] void reexec(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  ::execv("/proc/self/exe", args.data());
  throw Error(detail::concat("could not re-execute ", argv.empty() ? "" : argv[0],
                             " with the BLAS settings: ", std::strerror(errno)));
}

}  // namespace

std::string openblas_corename() {
  using Fn = char* (*)();
  auto fn = reinterpret_cast<Fn>(::dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  if (fn == nullptr) {
    // A process without libtorch (the launcher): the BLAS its ranks will load, asked directly.
    if (void* blas = ::dlopen("libblas.so.3", RTLD_LAZY | RTLD_LOCAL)) {
      fn = reinterpret_cast<Fn>(::dlsym(blas, "openblas_get_corename"));
    }
  }
  if (fn == nullptr) return "";
  const char* name = fn();
  return name ? name : "";
}

bool is_generic_openblas_core(const std::string& core) {
  // OpenBLAS's x86-64 cores without AVX2 kernels (driver/others/dynamic.c corename table).
  static const char* const kGeneric[] = {
      "Unknown",      "Katmai",      "Coppermine", "Northwood",   "Prescott", "Banias",
      "Atom",         "Core2",       "Penryn",     "Dunnington",  "Nehalem",  "Opteron",
      "Opteron_SSE3", "Barcelona",   "Nano",       "Sandybridge", "Bobcat",   "Bulldozer",
      "Piledriver",   "Steamroller", "Excavator"};
  for (const char* g : kGeneric) {
    if (strcasecmp(core.c_str(), g) == 0) return true;
  }
  return false;
}

std::string matching_openblas_coretype(const CpuInfo& cpu) {
  if (cpu.avx512) return "SkylakeX";
  if (cpu.avx2) return "Haswell";
  return "";
}

BlasChoice choose_openblas_coretype(const std::string& detected_core, const CpuInfo& cpu,
                                    const char* env_coretype, const char* auto_marker) {
  BlasChoice c;
  c.detected_core = detected_core;
  c.env_coretype = env_coretype ? env_coretype : "";
  const std::string marker = auto_marker ? auto_marker : "";
  if (!c.env_coretype.empty()) {
    c.user_set = marker != c.env_coretype;
    c.reason = c.user_set ? "OPENBLAS_CORETYPE=" + c.env_coretype + " set in the environment (kept)"
                          : "OPENBLAS_CORETYPE=" + c.env_coretype +
                                " chosen by deepshard (OpenBLAS detected a generic core)";
    return c;
  }
  if (marker.rfind("rejected:", 0) == 0) {
    c.reason = "OpenBLAS core " + detected_core + " (OPENBLAS_CORETYPE=" + marker.substr(9) +
               " failed the numeric check and was dropped)";
    return c;
  }
  if (detected_core.empty()) {
    c.reason = "no OpenBLAS loaded";
    return c;
  }
  const std::string better = matching_openblas_coretype(cpu);
  if (is_generic_openblas_core(detected_core) && !better.empty()) {
    c.coretype_to_set = better;
    c.reason = "OpenBLAS fell back to its generic core " + detected_core + " on a CPU with " +
               cpu.isa() + ": ranks run with OPENBLAS_CORETYPE=" + better;
    return c;
  }
  c.reason = "OpenBLAS core " + detected_core + " (detected by OpenBLAS)";
  return c;
}

void record_blas_environment(BlasEnvironment env) { recorded_environment() = std::move(env); }

BlasSgemmFn loaded_blas_sgemm() {
  static const auto fn = reinterpret_cast<BlasSgemmFn>(::dlsym(RTLD_DEFAULT, "sgemm_"));
  return fn;
}

BlasChoice current_blas_choice() {
  const BlasEnvironment& env = recorded_environment();
  return choose_openblas_coretype(openblas_corename(), detect_cpu(), c_str_or_null(env.coretype),
                                  c_str_or_null(env.auto_marker));
}

std::map<std::string, std::string> blas_env_for_ranks(const BlasChoice& choice) {
  if (choice.coretype_to_set.empty()) return {};
  return {{"OPENBLAS_CORETYPE", choice.coretype_to_set},
          {kAutoCoretypeVar, choice.coretype_to_set}};
}

bool blas_numerically_correct(std::string* detail) {
  const BlasSgemmFn sgemm = loaded_blas_sgemm();
  auto sgemv = reinterpret_cast<SgemvFn>(::dlsym(RTLD_DEFAULT, "sgemv_"));
  if (sgemm == nullptr || sgemv == nullptr) {
    *detail = "no sgemm_/sgemv_ in this process";
    return false;
  }
  const auto column_major = [sgemm](bool ta, bool tb, int m, int n, int k, const float* a, int lda,
                                    const float* b, int ldb, float beta, float* c, int ldc) {
    const float alpha = 1.0f;
    sgemm(ta ? "T" : "N", tb ? "T" : "N", &m, &n, &k, &alpha, a, &lda, b, &ldb, &beta, c, &ldc);
  };
  if (!sgemm_check::check_all(column_major, detail)) return false;
  return check_sgemv(sgemv, 100, 77, false, detail) && check_sgemv(sgemv, 65, 130, true, detail);
}

std::string ensure_blas_kernels(const std::vector<std::string>& argv) {
  const BlasChoice choice = current_blas_choice();
  if (!choice.coretype_to_set.empty()) {
    for (const auto& [name, value] : blas_env_for_ranks(choice))
      ::setenv(name.c_str(), value.c_str(), 1);
    reexec(argv);
  }
  if (!choice.env_coretype.empty() && !choice.user_set) {
    std::string detail;
    if (!blas_numerically_correct(&detail)) {
      ::setenv(kAutoCoretypeVar, ("rejected:" + choice.env_coretype).c_str(), 1);
      ::unsetenv("OPENBLAS_CORETYPE");
      std::fprintf(stderr,
                   "deepshard: warning: OPENBLAS_CORETYPE=%s gives wrong results (%s); "
                   "running with OpenBLAS's own choice\n",
                   choice.env_coretype.c_str(), detail.c_str());
      reexec(argv);
    }
    return choice.reason + ", verified numerically";
  }
  return choice.reason;
}

}  // namespace deepshard::platform
