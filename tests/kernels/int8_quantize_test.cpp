// Block-wise int8 quantize/dequantize (kernels/int8_quantize.h): every implementation this CPU
// runs (scalar, AVX2, AVX-512: platform/kernel_isa.h; the others are skipped, saying so) equals a
// plain reference written from the documented formula bit for bit — values, scales and dequantized
// fp32/bf16 — over sizes and block sizes with partial vectors and partial blocks, zero and denormal
// blocks, and stays within the error bound (m / 256; m / 128 for the values clamped to 127; plus
// float rounding of 1e-6 m). The tensor functions equal the raw kernels and reject what they cannot
// take.
#include "kernels/int8_quantize.h"

#include <c10/util/BFloat16.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cfloat>
#include <cmath>
#include <random>
#include <vector>

#include "deepshard/util/error.h"
#include "support/kernel_isa_test.h"

namespace deepshard::kernels {
namespace int8_quantize_test {

struct Reference {
  std::vector<int8_t> q;
  std::vector<float> scales;
  std::vector<float> dequantized;
};

Reference reference(const std::vector<float>& x, int64_t block) {
  Reference r;
  const int64_t n = int64_t(x.size());
  r.q.resize(x.size());
  r.dequantized.resize(x.size());
  for (int64_t start = 0; start < n; start += block) {
    const int64_t end = std::min(n, start + block);
    float m = 0;
    for (int64_t i = start; i < end; ++i) m = std::max(m, std::fabs(x[i]));
    const float scale = m < FLT_MIN ? 1.0f : 256.0f / (2.0f * m);
    const float inv = 1.0f / scale;
    r.scales.push_back(inv);
    for (int64_t i = start; i < end; ++i) {
      const float v = std::nearbyint(x[i] * scale);
      r.q[i] = int8_t(std::clamp(v, -128.0f, 127.0f));
      r.dequantized[i] = float(r.q[i]) * inv;
    }
  }
  return r;
}

// Gaussian values whose magnitude changes from block to block; block 1 is all zeros and block 2
// denormal (when there are that many).
std::vector<float> sample(int64_t n, int64_t block, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal;
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t b = i / block;
    const float magnitude = b == 1 ? 0.0f : b == 2 ? 1e-39f : std::pow(10.0f, float(b % 7) - 3);
    x[size_t(i)] = normal(gen) * magnitude;
  }
  return x;
}

std::vector<float> through_bf16(std::vector<float> x) {
  for (float& v : x) v = float(c10::BFloat16(v));
  return x;
}

using platform::KernelIsa;

// Each level this CPU runs (the others are skipped), forced for the tensor functions.
class Int8QuantizeIsa : public testing::EachKernelIsa {};

TEST_P(Int8QuantizeIsa, EqualsTheReferenceAndMeetsTheErrorBound) {
  const KernelIsa isa = GetParam();
  int cases = 0;
  for (int64_t n : {1, 7, 15, 16, 17, 31, 100, 1000, 4099}) {
    for (int64_t block : {1, 3, 8, 16, 64, 256, 2048}) {
      const std::vector<float> x = sample(n, block, uint32_t(n * 131 + block));
      const Reference ref = reference(x, block);
      std::vector<int8_t> q(x.size());
      std::vector<float> scales(size_t(quantize_blocks(n, block)));
      quantize_int8(x.data(), n, block, q.data(), scales.data(), isa);
      ASSERT_EQ(q, ref.q) << "n " << n << ", block " << block;
      ASSERT_EQ(scales, ref.scales) << "n " << n << ", block " << block;
      std::vector<float> out(x.size());
      dequantize_int8(q.data(), scales.data(), n, block, out.data(), isa);
      ASSERT_EQ(out, ref.dequantized) << "n " << n << ", block " << block;
      for (int64_t i = 0; i < n; ++i) {
        float m = 0;  // the block's absolute maximum
        for (int64_t j = i / block * block; j < std::min(n, (i / block + 1) * block); ++j) {
          m = std::max(m, std::fabs(x[size_t(j)]));
        }
        // Values in the top half-step on the positive side round to 128 and are clamped to 127.
        const float bound = x[i] > m * (127.5f / 128) ? m / 128 : m / 256;
        ASSERT_LE(std::fabs(out[i] - x[i]), bound + m * 1e-6f + FLT_MIN)  // + float rounding
            << "n " << n << ", block " << block << ", element " << i;
      }
      ++cases;
    }
  }
  std::printf("%s: %d cases equal the reference bit for bit\n", to_string(isa), cases);
}

TEST_P(Int8QuantizeIsa, Bf16InAndOutEqualTheReference) {
  const KernelIsa isa = GetParam();
  for (int64_t n : {5, 16, 33, 1000}) {
    for (int64_t block : {4, 16, 128}) {
      const std::vector<float> x = through_bf16(sample(n, block, uint32_t(n + block)));
      std::vector<uint16_t> bits(x.size());
      for (size_t i = 0; i < x.size(); ++i) bits[i] = c10::BFloat16(x[i]).x;
      const Reference ref = reference(x, block);
      std::vector<int8_t> q(x.size());
      std::vector<float> scales(size_t(quantize_blocks(n, block)));
      quantize_int8_bf16(bits.data(), n, block, q.data(), scales.data(), isa);
      ASSERT_EQ(q, ref.q) << "n " << n << ", block " << block;
      ASSERT_EQ(scales, ref.scales) << "n " << n << ", block " << block;
      std::vector<uint16_t> out(x.size());
      dequantize_int8_bf16(q.data(), scales.data(), n, block, out.data(), isa);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(out[i], c10::BFloat16(ref.dequantized[i]).x)
            << "n " << n << ", block " << block << ", element " << i;
      }
    }
  }
}

// The tensor functions run platform::kernel_isa()'s implementation: the forced one.
TEST_P(Int8QuantizeIsa, TensorFunctionsEqualTheKernelsOverThreads) {
  std::printf("implementation: %s\n", platform::kernel_isa_status().c_str());
  const int64_t n = 300007, block = 2048;
  const std::vector<float> x = sample(n, block, 7);
  const at::Tensor t = torch::from_blob(const_cast<float*>(x.data()), {n}).clone();
  const Int8Blocks q = quantize_int8(t, block);
  const Reference ref = reference(x, block);
  ASSERT_EQ(q.values.numel(), n);
  ASSERT_EQ(q.scales.numel(), quantize_blocks(n, block));
  EXPECT_EQ(std::vector<int8_t>(q.values.data_ptr<int8_t>(), q.values.data_ptr<int8_t>() + n),
            ref.q);
  EXPECT_EQ(
      std::vector<float>(q.scales.data_ptr<float>(), q.scales.data_ptr<float>() + q.scales.numel()),
      ref.scales);
  at::Tensor out = torch::empty({n});
  dequantize_int8(q, out);
  EXPECT_EQ(std::vector<float>(out.data_ptr<float>(), out.data_ptr<float>() + n), ref.dequantized);

  const at::Tensor b = t.to(torch::kBFloat16);
  at::Tensor back = torch::empty({n}, torch::kBFloat16);
  dequantize_int8(quantize_int8(b, 256), back);
  const double rel =
      ((back.to(torch::kFloat) - b.to(torch::kFloat)).abs().sum() / b.to(torch::kFloat).abs().sum())
          .item<double>();
  std::printf("bf16 round trip: mean relative error %.2e\n", rel);
  EXPECT_LT(rel, 1e-2);
}

INSTANTIATE_TEST_SUITE_P(Isas, Int8QuantizeIsa, testing::kAllKernelIsas, testing::KernelIsaName);

TEST(Int8Quantize, RejectsWhatItCannotTake) {
  EXPECT_THROW(quantize_int8(torch::ones({4}, torch::kDouble), 2), Error);
  EXPECT_THROW(quantize_int8(torch::ones({4}), 0), Error);
  EXPECT_THROW(quantize_int8(torch::ones({4, 4}).t(), 2), Error);
  const Int8Blocks q = quantize_int8(torch::ones({10}), 4);
  EXPECT_THROW(dequantize_int8(q, torch::empty({9})), Error);
  EXPECT_THROW(dequantize_int8(q, torch::empty({10}, torch::kHalf)), Error);
}

}  // namespace int8_quantize_test
}  // namespace deepshard::kernels
