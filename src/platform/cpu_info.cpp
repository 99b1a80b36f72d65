// CPU model and ISA detection (cpu_info.h): GCC's __builtin_cpu_supports (which also checks that
// the OS saves the wide registers) plus cpuid leaf 7 for the bf16 extensions it does not name.
#include "platform/cpu_info.h"

#include <cpuid.h>
#include <sched.h>

#include <algorithm>
#include <fstream>
#include <thread>

namespace deepshard::platform {
namespace {

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    auto start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "" : line.substr(start);
  }
  return "";
}

int usable_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace

std::string CpuInfo::isa() const {
  std::string s = avx2 ? "avx2 fma" : "sse (no avx2)";
  if (avx512) s += " avx512f/bw/dq/vl";
  if (avx512_bf16) s += " avx512_bf16";
  if (amx_bf16) s += " amx_bf16";
  return s;
}

CpuInfo detect_cpu() {
  __builtin_cpu_init();
  CpuInfo c;
  c.model_name = cpu_model_name();
  c.cores = usable_cores();
  c.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  c.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (c.avx512 && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx)) c.avx512_bf16 = (eax >> 5) & 1;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) c.amx_bf16 = (edx >> 22) & 1;
  return c;
}

}  // namespace deepshard::platform
