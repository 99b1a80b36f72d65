// The matmul throughput this process reaches: the peak MFU is measured against. A square n×n
// matmul (at::mm, i.e. OpenBLAS for fp32 and oneDNN for bf16 on CPU) timed over short windows with
// the current intra-op threads; the best window counts (a peak, not an average under load).
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>

namespace deepshard::train {

// GFLOP/s of an n×n×n matmul in `dtype` (about `seconds` of timing after a warm-up).
double measure_matmul_gflops(at::ScalarType dtype, int64_t n = 1024, double seconds = 0.2);

// Sets the intra-op threads of libtorch (OpenMP) and of OpenBLAS (which ignores libtorch's
// setting; resolved with dlsym).
void set_compute_threads(int threads);

// oneDNN's version ("2.6.3"), "" when oneDNN is not loaded.
std::string onednn_version();

}  // namespace deepshard::train
