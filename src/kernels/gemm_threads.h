// The fused kernels' GEMM (platform/sgemm.h) runs on torch's intra-op thread count
// (at::get_num_threads): oneDNN's sgemm on the calling thread's omp_get_max_threads() (Debian's
// oneDNN and libtorch share libgomp), OpenBLAS's on its own pool (openblas_set_num_threads, which
// libtorch does not set). The kernels re-set the backend's from at::get_num_threads() before
// their products, outside parallel regions (OpenBLAS's only when it is the backend). Inside a
// kernel's own parallel loop each product runs on one thread: oneDNN's by nested OpenMP, OpenBLAS's
// by OneThreadBlas around the loop.
#pragma once

#include <ATen/Parallel.h>
#include <omp.h>

#include "platform/sgemm.h"

namespace deepshard::kernels {

inline void match_gemm_threads_to_torch() {
  if (omp_in_parallel()) return;
  const int threads = at::get_num_threads();
  if (omp_get_max_threads() != threads) omp_set_num_threads(threads);
  if (platform::sgemm_backend() != platform::SgemmBackend::kOpenBlas) return;
  const int blas = platform::openblas_threads();
  if (blas > 0 && blas != threads) platform::set_openblas_threads(threads);
}

// OpenBLAS at one thread for the scope when `parallel` (a loop whose iterations each call the
// GEMM on torch's threads), back to its count after.
class OneThreadBlas {
 public:
  explicit OneThreadBlas(bool parallel)
      : restore_(parallel && platform::sgemm_backend() == platform::SgemmBackend::kOpenBlas
                     ? platform::openblas_threads()
                     : 0) {
    if (restore_ > 1) platform::set_openblas_threads(1);
  }
  ~OneThreadBlas() {
    if (restore_ > 1) platform::set_openblas_threads(restore_);
  }
  OneThreadBlas(const OneThreadBlas&) = delete;
  OneThreadBlas& operator=(const OneThreadBlas&) = delete;

 private:
  int restore_;
};

}  // namespace deepshard::kernels
