// A single-precision GEMM checked against a double-precision reference on a few shapes and
// transpositions: shared by the OpenBLAS check (blas_kernels.h) and the oneDNN one (dnnl_sgemm.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace deepshard::platform::sgemm_check {

// Column-major C = op(A) op(B) + beta C (alpha 1), Fortran BLAS conventions: A is m×k (stored k×m
// when ta), B is k×n (n×k when tb).
using ColMajorSgemm =
    std::function<void(bool ta, bool tb, int m, int n, int k, const float* a, int lda,
                       const float* b, int ldb, float beta, float* c, int ldc)>;

// Deterministic values in [-1, 1] for a seed.
std::vector<float> random_values(size_t n, uint32_t seed);

// One product checked element by element within 1e-4 of sum |a||b| (wrong kernels are far off);
// C starts at 0.5, so beta 0 must ignore it and beta 1 must add it.
bool check(const ColMajorSgemm& sgemm, int m, int n, int k, bool ta, bool tb, float beta,
           std::string* detail);

// The shapes every sgemm is checked on: vector tails, all four transpositions, beta 0 and 1.
bool check_all(const ColMajorSgemm& sgemm, std::string* detail);

}  // namespace deepshard::platform::sgemm_check
