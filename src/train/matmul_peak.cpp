// Matmul peak measurement, compute threads and the oneDNN version (matmul_peak.h).
#include "train/matmul_peak.h"

#include <dlfcn.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>

#include "util/stopwatch.h"

namespace deepshard::train {

double measure_matmul_gflops(at::ScalarType dtype, int64_t n, double seconds) {
  torch::NoGradGuard no_grad;
  const auto options = torch::TensorOptions().dtype(dtype);
  const at::Tensor a = torch::randn({n, n}).to(options), b = torch::randn({n, n}).to(options);
  at::Tensor c = torch::empty({n, n}, options);
  for (int i = 0; i < 2; ++i) at::mm_out(c, a, b);  // warm-up: JIT kernels, pages
  using Clock = std::chrono::steady_clock;
  const double flops = 2.0 * double(n) * double(n) * double(n);
  double best = 0.0;
  const int windows = 4;
  for (int w = 0; w < windows; ++w) {
    const auto t0 = Clock::now();
    int reps = 0;
    double elapsed = 0.0;
    do {
      at::mm_out(c, a, b);
      ++reps;
      elapsed = util::seconds_since(t0);
    } while (elapsed < seconds / windows);
    best = std::max(best, flops * reps / elapsed / 1e9);
  }
  return best;
}

void set_compute_threads(int threads) {
  at::set_num_threads(threads);
  using Fn = void (*)(int);
  if (auto fn = reinterpret_cast<Fn>(::dlsym(RTLD_DEFAULT, "openblas_set_num_threads")))
    fn(threads);
}

std::string onednn_version() {
  struct Version {
    int major, minor, patch;
    const char* hash;
  };
  using Fn = const Version* (*)();
  auto fn = reinterpret_cast<Fn>(::dlsym(RTLD_DEFAULT, "dnnl_version"));
  if (fn == nullptr) return "";
  const Version* v = fn();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

}  // namespace deepshard::train
