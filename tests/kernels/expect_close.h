// The kernels' comparison with their libtorch references: max |a - b| <= atol + rtol * max |b|,
// same sizes (dtypes may differ: a bf16 result against an fp32 reference); the message gives the
// difference and the reference's scale.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>

namespace deepshard::kernels {

inline void expect_close(const at::Tensor& a, const at::Tensor& b, double atol, double rtol,
                         const std::string& what) {
  ASSERT_EQ(a.sizes(), b.sizes()) << what;
  const double diff = (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
  const double scale = b.to(at::kDouble).abs().max().item<double>();
  EXPECT_LE(diff, atol + rtol * scale)
      << what << ": max difference " << diff << " (scale " << scale << ")";
}

}  // namespace deepshard::kernels
