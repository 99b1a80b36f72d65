// `deepshard doctor [--ranks N]`: what this machine gives a rank: CPU model and ISA, the OpenBLAS
// kernels (and whether deepshard replaced a generic fallback core), threads per rank, the oneDNN
// version and whether the fp32 Linear layers run on its sgemm (numerically checked), the
// instruction-set level of deepshard's own kernels (DEEPSHARD_KERNEL_ISA), how bf16 models multiply
// (train's choice without --bf16-compute: DEEPSHARD_BF16_COMPUTE, else auto), measured fp32 and
// bf16 matmul GFLOP/s with those threads, and the faster precision.
#include <cstdio>
#include <string>

#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "cli/process_options.h"
#include "deepshard/util/error.h"
#include "kernels/bf16_compute.h"
#include "platform/blas_kernels.h"
#include "platform/cpu_info.h"
#include "platform/kernel_isa.h"
#include "platform/sgemm.h"
#include "train/matmul_peak.h"
#include "util/strings.h"

namespace deepshard::cli {
namespace {

const char* kDoctorUsage =
    "usage: deepshard doctor [--ranks N] [--size S]\n"
    "\n"
    "Prints the CPU model and vector ISA, the OpenBLAS core in use (a generic fallback core on\n"
    "an AVX2/AVX-512 CPU is replaced by the matching OPENBLAS_CORETYPE, as `deepshard launch`\n"
    "does for its ranks, unless OPENBLAS_CORETYPE is set), the threads each of N local ranks gets\n"
    "(cores / N, default N = 1), the oneDNN version, whether fp32 Linear layers run on oneDNN's\n"
    "sgemm (checked against a double-precision reference), the instruction set of deepshard's\n"
    "own kernels (the best this CPU runs, or DEEPSHARD_KERNEL_ISA=avx512|avx2|scalar), how bf16\n"
    "models multiply here (train's --bf16-compute default: DEEPSHARD_BF16_COMPUTE, else auto),\n"
    "and the fp32 and bf16 GFLOP/s of an SxS matmul (default\n"
    "1024) with that many threads: the peak `deepshard train` reports MFU against. It ends with\n"
    "the precision that is faster here (bf16.enabled in the run file).\n";

}  // namespace

int run_doctor_command(const Args& args) {
  ArgParser parser({"ranks", "size"}, {"help"});
  parser.parse(args);
  if (parser.print_help_if_asked(kDoctorUsage)) return 0;
  parser.reject_positional();
  const int64_t ranks = parser.get_int("ranks", 1);
  const int64_t size = parser.get_int("size", 1024);
  DS_CHECK(ranks >= 1, UsageError, "--ranks must be >= 1, got ", ranks);
  DS_CHECK(size >= 16, UsageError, "--size must be >= 16, got ", size);

  std::vector<std::string> argv = {"deepshard", "doctor"};
  argv.insert(argv.end(), args.begin(), args.end());
  const std::string blas = platform::ensure_blas_kernels(argv);

  const platform::CpuInfo cpu = platform::detect_cpu();
  const int threads = static_cast<int>(std::max<int64_t>(1, cpu.cores / ranks));
  train::set_compute_threads(threads);
  const std::string onednn = train::onednn_version();
  std::printf("cpu:              %s (%d usable cores)\n",
              cpu.model_name.empty() ? "unknown" : cpu.model_name.c_str(), cpu.cores);
  std::printf("isa:              %s\n", cpu.isa().c_str());
  std::printf("blas:             %s\n", blas.c_str());
  std::printf("openblas core:    %s\n", platform::openblas_corename().c_str());
  std::printf("threads per rank: %d (%lld local rank(s))\n", threads,
              static_cast<long long>(ranks));
  std::printf("onednn:           %s\n", onednn.empty() ? "not loaded" : onednn.c_str());
  std::printf("linear layers:    %s\n", platform::sgemm_status().c_str());
  std::printf("kernels:          %s\n", platform::kernel_isa_status().c_str());
  // What `deepshard train` chooses without --bf16-compute (DEEPSHARD_BF16_COMPUTE, else auto).
  const kernels::Bf16ComputeChoice bf16_compute =
      bf16_compute_from_environment(process_options(), cpu);
  std::printf("bf16 compute:     %s (%s)\n", kernels::to_string(bf16_compute.compute),
              bf16_compute.reason.c_str());
  std::fflush(stdout);
  const double fp32 = train::measure_matmul_gflops(at::kFloat, size, 1.0);
  std::printf("matmul fp32:      %.1f GFLOP/s (%lldx%lld, %d thread(s))\n", fp32,
              static_cast<long long>(size), static_cast<long long>(size), threads);
  std::fflush(stdout);
  double bf16 = 0.0;
  try {
    bf16 = train::measure_matmul_gflops(at::kBFloat16, size, 1.0);
    std::printf("matmul bf16:      %.1f GFLOP/s (libtorch's bf16 kernels)\n", bf16);
  } catch (const std::exception& e) {  // c10::Error, or oneDNN's own dnnl::error
    std::printf("matmul bf16:      libtorch's bf16 kernels fail here (%s)\n",
                strings::first_line(e.what()).c_str());
  }
  if (bf16_compute.compute == kernels::Bf16Compute::kFp32) {
    // bf16 models multiply in fp32 here: at fp32's matmul speed, with bf16's memory and bytes.
    std::printf("fastest precision: fp32 matmuls either way (bf16 computes in fp32 here)\n");
    return 0;
  }
  if (bf16 == 0.0) {
    std::printf("fastest precision: fp32 (libtorch's bf16 matmul fails here)\n");
    return 0;
  }
  std::printf("fastest precision: %s (%.2fx the other)\n", bf16 > fp32 ? "bf16" : "fp32",
              bf16 > fp32 ? bf16 / fp32 : fp32 / bf16);
  return 0;
}

}  // namespace deepshard::cli
