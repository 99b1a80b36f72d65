// oneDNN's sgemm runs on the calling thread's omp_get_max_threads(), which at::set_num_threads
// sets when libtorch runs on OpenMP; the kernels that call it (linear.cpp, causal_attention.cpp)
// re-set it from at::get_num_threads() in case the two differ. Inside a parallel region nothing
// changes (nested sgemm calls stay on one thread).
#pragma once

#include <ATen/Parallel.h>
#include <omp.h>

namespace deepshard::kernels {

inline void match_dnnl_threads_to_torch() {
  const int threads = at::get_num_threads();
  if (!omp_in_parallel() && omp_get_max_threads() != threads) omp_set_num_threads(threads);
}

}  // namespace deepshard::kernels
