// The bf16 compute choice (bf16_compute.h): the decision table, the numeric check of libtorch's
// bf16 matmul, and the process-wide setting.
#include "kernels/bf16_compute.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <atomic>
#include <cmath>
#include <mutex>

#include "deepshard/util/error.h"
#include "util/strings.h"

namespace deepshard::kernels {
namespace {

std::atomic<Bf16Compute> g_compute{Bf16Compute::kNative};
std::mutex g_reason_mutex;
std::string g_reason = "libtorch's bf16 kernels (not chosen yet)";

// One product of bf16 operands `a` [m, k] and `b` [k, n] (given in any layout) as libtorch
// computed it (`got`, [m, n] or [batch, m, n]) against the double-precision reference.
bool within_fp32_accumulation(const at::Tensor& a, const at::Tensor& b, const at::Tensor& got,
                              const char* what, std::string* detail) {
  const at::Tensor ad = a.to(at::kDouble), bd = b.to(at::kDouble);
  const at::Tensor exact = torch::matmul(ad, bd);
  const at::Tensor magnitude_sum = torch::matmul(ad.abs(), bd.abs());  // Σ|a||b| per element
  const at::Tensor error = (got.to(at::kDouble) - exact).abs();
  const at::Tensor bound = exact.abs() * std::ldexp(1.0, -8) + magnitude_sum * 1e-4;
  const at::Tensor excess = error - bound;
  if (excess.max().item<double>() <= 0.0) return true;
  const int64_t worst = excess.flatten().argmax().item<int64_t>();
  *detail = detail::concat(
      "libtorch's bf16 ", what, " (k = ", a.size(-1), ") is off by ",
      error.flatten()[worst].item<double>(), " where fp32 accumulation allows ",
      bound.flatten()[worst].item<double>(), " (",
      error.flatten()[worst].item<double>() / magnitude_sum.flatten()[worst].item<double>(),
      " of the sum of |products|: a bf16 accumulation)");
  return false;
}

}  // namespace

const char* to_string(Bf16Compute compute) {
  return compute == Bf16Compute::kFp32 ? "fp32" : "native";
}

bool libtorch_bf16_matmul_accurate(std::string* detail) {
  // Fixed operands (values in [-1, 1]), independent of the caller's random stream.
  const auto generator = at::detail::createCPUGenerator(20261127);
  constexpr int64_t kM = 24, kN = 40, kK = 1024;
  const auto values = [&](std::initializer_list<int64_t> sizes) {
    return (at::rand(sizes, generator, at::kFloat) * 2 - 1).to(at::kBFloat16);
  };
  const at::Tensor a = values({kM, kK}), b = values({kK, kN});
  const at::Tensor at_ = a.t().contiguous(), bt = b.t().contiguous();  // stored transposed
  const at::Tensor batched_a = values({2, kM, kK});
  torch::NoGradGuard no_grad;
  // A library that cannot multiply bf16 here at all (oneDNN capped below its bf16 kernels by
  // ONEDNN_MAX_CPU_ISA while libtorch still sends it bf16) fails the check instead of the process.
  try {
    return within_fp32_accumulation(a, b, torch::mm(a, b), "mm (NN, as dX = dY W)", detail) &&
           within_fp32_accumulation(at_.t(), b, torch::mm(at_.t(), b), "mm (TN, as dW = dYᵀ X)",
                                    detail) &&
           within_fp32_accumulation(a, bt.t(), torch::mm(a, bt.t()), "mm (NT)", detail) &&
           within_fp32_accumulation(a, bt.t(), torch::linear(a, bt), "linear (y = x Wᵀ)", detail) &&
           within_fp32_accumulation(batched_a, b, torch::matmul(batched_a, b),
                                    "batched matmul (attention)", detail);
  } catch (const std::exception& e) {  // c10::Error, or oneDNN's own dnnl::error
    *detail = detail::concat("libtorch's bf16 matmul fails on this machine (",
                             strings::first_line(e.what()), ")");
    return false;
  }
}

Bf16ComputeChoice choose_bf16_compute(std::string_view setting, const platform::CpuInfo& cpu,
                                      const std::function<bool(std::string*)>& native_check,
                                      std::string_view source) {
  if (setting == "native" || setting == "fp32") {
    return {setting == "native" ? Bf16Compute::kNative : Bf16Compute::kFp32,
            detail::concat("set by ", source)};
  }
  DS_CHECK(setting == "auto", UsageError, source, " ", setting,
           ": expected auto (the default), native or fp32");
  if (!cpu.avx512_bf16 && !cpu.amx_bf16) {
    return {Bf16Compute::kFp32,
            "auto: this CPU has no bf16 arithmetic (AVX512-BF16, AMX-BF16), so bf16 operands "
            "are multiplied in fp32"};
  }
  std::string why;
  if (!native_check(&why)) {
    return {Bf16Compute::kFp32, "auto: " + why + "; bf16 operands are multiplied in fp32"};
  }
  return {Bf16Compute::kNative,
          std::string("auto: ") + (cpu.amx_bf16 ? "AMX-BF16" : "AVX512-BF16") +
              ", libtorch's bf16 matmul verified numerically (fp32 accumulation)"};
}

Bf16ComputeChoice choose_bf16_compute(std::string_view setting, const platform::CpuInfo& cpu,
                                      std::string_view source) {
  return choose_bf16_compute(setting, cpu, libtorch_bf16_matmul_accurate, source);
}

void set_bf16_compute(const Bf16ComputeChoice& choice) {
  {
    std::lock_guard<std::mutex> lock(g_reason_mutex);
    g_reason = choice.reason;
  }
  g_compute.store(choice.compute, std::memory_order_relaxed);
}

Bf16Compute bf16_compute() { return g_compute.load(std::memory_order_relaxed); }

Bf16ComputeChoice bf16_compute_choice() {
  std::lock_guard<std::mutex> lock(g_reason_mutex);
  return {bf16_compute(), g_reason};
}

}  // namespace deepshard::kernels
