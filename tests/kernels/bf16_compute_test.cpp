// bf16 computed in fp32 (kernels/bf16_compute.h): the decision table; the numeric check of
// libtorch's bf16 matmul, which fails on libtorch's generic bf16 GEMM (the one CPUs without
// AVX-512 run, selected here by switching libtorch's oneDNN off); and kernels::linear,
// kernels::matmul and kernels::causal_attention on bf16 operands in fp32: within the bf16
// rounding of the double-precision product of the same bf16 operands, bf16 in and out (gradients
// too), where libtorch's generic bf16 GEMM is off by far more.
#include "kernels/bf16_compute.h"

#include <ATen/Context.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "deepshard/util/error.h"
#include "kernels/causal_attention.h"
#include "kernels/libtorch_bf16.h"
#include "kernels/linear.h"
#include "kernels/matmul.h"
#include "platform/sgemm.h"
#include "support/scoped_bf16_compute.h"

namespace deepshard::kernels {
namespace bf16_compute_test {

platform::CpuInfo cpu_with(bool avx512_bf16, bool amx_bf16) {
  platform::CpuInfo cpu;
  cpu.avx2 = cpu.avx512 = true;
  cpu.avx512_bf16 = avx512_bf16;
  cpu.amx_bf16 = amx_bf16;
  return cpu;
}

using testing::ScopedBf16Compute;

// libtorch's oneDNN switched off for one test: its bf16 matmul then runs the generic GEMM that a
// CPU without AVX-512 runs (libtorch 1.13 uses oneDNN for bf16 only on AVX-512 BW/VL/DQ CPUs).
struct ScopedGenericBf16Gemm {
  ScopedGenericBf16Gemm() { at::globalContext().setUserEnabledMkldnn(false); }
  ~ScopedGenericBf16Gemm() { at::globalContext().setUserEnabledMkldnn(previous_); }
  ScopedGenericBf16Gemm(const ScopedGenericBf16Gemm&) = delete;
  ScopedGenericBf16Gemm& operator=(const ScopedGenericBf16Gemm&) = delete;

 private:
  // Off already when the kernels are forced below avx512 (kernels/libtorch_bf16.h).
  bool previous_ = at::globalContext().userEnabledMkldnn();
};

TEST(Bf16Compute, DecisionTable) {
  int checks = 0;
  const auto passing = [&](std::string*) { return ++checks, true; };
  const auto failing = [&](std::string* why) {
    ++checks;
    *why = "NN off by 0.1";
    return false;
  };
  EXPECT_EQ(choose_bf16_compute("native", cpu_with(false, false), failing).compute,
            Bf16Compute::kNative);
  EXPECT_EQ(choose_bf16_compute("fp32", cpu_with(true, true), passing).compute, Bf16Compute::kFp32);
  EXPECT_EQ(checks, 0);  // forced: nothing measured
  // auto without bf16 arithmetic: fp32, whatever libtorch would do.
  const auto no_bf16 = choose_bf16_compute("auto", cpu_with(false, false), passing);
  EXPECT_EQ(no_bf16.compute, Bf16Compute::kFp32);
  EXPECT_NE(no_bf16.reason.find("no bf16 arithmetic"), std::string::npos) << no_bf16.reason;
  EXPECT_EQ(checks, 0);
  // auto with AVX512-BF16 or AMX: native if the check passes, fp32 (saying why) if not.
  EXPECT_EQ(choose_bf16_compute("auto", cpu_with(true, false), passing).compute,
            Bf16Compute::kNative);
  EXPECT_EQ(choose_bf16_compute("auto", cpu_with(false, true), passing).compute,
            Bf16Compute::kNative);
  const auto refused = choose_bf16_compute("auto", cpu_with(true, true), failing);
  EXPECT_EQ(refused.compute, Bf16Compute::kFp32);
  EXPECT_NE(refused.reason.find("NN off by 0.1"), std::string::npos) << refused.reason;
  EXPECT_EQ(checks, 3);
  EXPECT_THROW(choose_bf16_compute("bf16", cpu_with(true, true), passing), UsageError);
}

TEST(Bf16Compute, CheckPassesOnOneDnnAndFailsOnTheGenericBf16Gemm) {
  std::string why;
  // libtorch 1.13 runs bf16 products on oneDNN on CPUs with AVX-512 BW/VL/DQ (fp32 accumulation,
  // natively with AVX512-BF16/AMX, emulated without), and on its generic GEMM otherwise, as in a
  // process whose kernels are forced below avx512 (kernels/libtorch_bf16.h).
  const platform::CpuInfo cpu = platform::detect_cpu();
  EXPECT_EQ(libtorch_bf16_matmul_accurate(&why), cpu.avx512 && kernels::libtorch_onednn_enabled())
      << why;
  ScopedGenericBf16Gemm generic;
  why.clear();
  EXPECT_FALSE(libtorch_bf16_matmul_accurate(&why));
  EXPECT_NE(why.find("a bf16 accumulation"), std::string::npos) << why;
  std::printf("generic bf16 GEMM: %s\n", why.c_str());
  // What "auto" does with it on a CPU that has bf16 arithmetic: refuses it.
  EXPECT_EQ(choose_bf16_compute("auto", cpu_with(true, true)).compute, Bf16Compute::kFp32);
}

// Largest |got - exact| over the largest |exact| (exact: double precision of the same bf16
// operands).
double relative_error(const at::Tensor& got, const at::Tensor& exact) {
  return (got.to(at::kDouble) - exact).abs().max().item<double>() /
         exact.abs().max().item<double>();
}

TEST(Bf16Compute, LinearInFp32IsAsAccurateAsOneBf16Rounding) {
  if (!platform::sgemm_usable()) GTEST_SKIP() << platform::sgemm_status();
  torch::manual_seed(3);
  // The tiny GPT's MLP projection at a training step's rows: dW sums 1152 products.
  const int64_t rows = 1152, in = 256, out = 64;
  const at::Tensor x = torch::randn({rows, in}).to(at::kBFloat16);
  const at::Tensor w = (torch::randn({out, in}) * 0.05).to(at::kBFloat16);
  const at::Tensor b = torch::randn({out}).to(at::kBFloat16);
  const at::Tensor dy = torch::randn({rows, out}).to(at::kBFloat16);
  const at::Tensor xd = x.to(at::kDouble), wd = w.to(at::kDouble), dyd = dy.to(at::kDouble);
  const at::Tensor y_exact = torch::linear(xd, wd, b.to(at::kDouble));
  const at::Tensor dx_exact = dyd.mm(wd), dw_exact = dyd.t().mm(xd);
  struct Errors {
    double y, dx, dw;
  };
  const auto run = [&](const char* what) {
    const at::Tensor xv = x.clone().requires_grad_(true), wv = w.clone().requires_grad_(true);
    const at::Tensor bv = b.clone().requires_grad_(true);
    const at::Tensor y = kernels::linear(xv, wv, bv);
    const auto g = torch::autograd::grad({y}, {xv, wv, bv}, {dy});
    EXPECT_EQ(y.scalar_type(), at::kBFloat16) << what;
    for (const auto& t : g) EXPECT_EQ(t.scalar_type(), at::kBFloat16) << what;
    const Errors e{relative_error(y, y_exact), relative_error(g[0], dx_exact),
                   relative_error(g[1], dw_exact)};
    std::printf("%s: relative error y %.2e, dX %.2e, dW %.2e\n", what, e.y, e.dx, e.dw);
    return e;
  };
  Errors fp32;
  {
    ScopedBf16Compute compute(Bf16Compute::kFp32);
    ASSERT_TRUE(fused_linear_supported(x, w, b));
    fp32 = run("bf16 computed in fp32");
  }
  // One bf16 rounding of each result: 2^-8 of the largest element (sums in fp32 add far less).
  const double bf16_rounding = std::ldexp(1.0, -8);
  EXPECT_LT(fp32.y, bf16_rounding);
  EXPECT_LT(fp32.dx, bf16_rounding);
  EXPECT_LT(fp32.dw, bf16_rounding);
  const ScopedBf16Compute native_compute(Bf16Compute::kNative);
  ScopedGenericBf16Gemm generic;
  const Errors native = run("libtorch's generic bf16 GEMM");
  EXPECT_GT(native.dw, 4 * bf16_rounding);  // the defect the fp32 path removes
}

TEST(Bf16Compute, MatmulAndAttentionInFp32) {
  if (!platform::sgemm_usable()) GTEST_SKIP() << platform::sgemm_status();
  torch::manual_seed(4);
  ScopedBf16Compute compute(Bf16Compute::kFp32);
  // The attention's products P v: [B, H, T, T] x [B, H, T, hd], k = T = 256.
  const at::Tensor p = torch::rand({2, 2, 256, 256}).to(at::kBFloat16);
  const at::Tensor v = torch::randn({2, 2, 256, 32}).to(at::kBFloat16);
  const at::Tensor pv = kernels::matmul(p, v);
  EXPECT_EQ(pv.scalar_type(), at::kBFloat16);
  EXPECT_LT(relative_error(pv, torch::matmul(p.to(at::kDouble), v.to(at::kDouble))),
            std::ldexp(1.0, -8));
  // The blocked attention on bf16 qkv: the fp32 kernel on its fp32 copy, y and dqkv bf16 and
  // equal to the fp32 kernel's results rounded once.
  const at::Tensor qkv = torch::randn({2, 64, 3 * 64}).to(at::kBFloat16);
  ASSERT_TRUE(blocked_attention_supported(qkv, 4));
  const at::Tensor dy = torch::randn({2, 64, 64}).to(at::kBFloat16);
  const at::Tensor qb = qkv.clone().requires_grad_(true);
  const at::Tensor y = causal_attention(qb, 4);
  const at::Tensor dq = torch::autograd::grad({y}, {qb}, {dy})[0];
  const at::Tensor qf = qkv.to(at::kFloat).requires_grad_(true);
  const at::Tensor yf = causal_attention(qf, 4);
  const at::Tensor dqf = torch::autograd::grad({yf}, {qf}, {dy.to(at::kFloat)})[0];
  EXPECT_EQ(y.scalar_type(), at::kBFloat16);
  EXPECT_EQ(dq.scalar_type(), at::kBFloat16);
  EXPECT_TRUE(torch::equal(y, yf.to(at::kBFloat16)));
  EXPECT_TRUE(torch::equal(dq, dqf.to(at::kBFloat16)));
}

TEST(Bf16Compute, NativeKeepsLibtorch) {
  // --bf16-compute native (a test binary's default): bf16 operands are libtorch's.
  const ScopedBf16Compute native(Bf16Compute::kNative);
  const at::Tensor a = torch::randn({8, 16}).to(at::kBFloat16);
  const at::Tensor w = torch::randn({4, 16}).to(at::kBFloat16);
  EXPECT_EQ(bf16_compute(), Bf16Compute::kNative);
  EXPECT_FALSE(fused_linear_supported(a, w, {}));
  EXPECT_FALSE(blocked_attention_supported(torch::randn({1, 4, 12}).to(at::kBFloat16), 2));
  EXPECT_TRUE(torch::equal(kernels::linear(a, w), torch::linear(a, w)));
  EXPECT_TRUE(torch::equal(kernels::matmul(a, w.t()), torch::matmul(a, w.t())));
}

}  // namespace bf16_compute_test
}  // namespace deepshard::kernels
