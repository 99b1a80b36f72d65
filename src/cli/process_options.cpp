// The executable's environment knobs (process_options.h): the one place outside the rendezvous and
// the launcher that reads the environment.
#include "cli/process_options.h"

#include <cstdlib>
#include <string_view>

#include "cli/environment.h"
#include "deepshard/util/error.h"
#include "kernels/libtorch_bf16.h"
#include "platform/kernel_isa.h"
#include "platform/sgemm.h"
#include "util/log.h"
#include "zero/stage3/storage_resize.h"

namespace deepshard::cli {

const ProcessOptions& process_options() {
  static const ProcessOptions options = [] {
    ProcessOptions o;
    o.log_level = non_empty_env("DEEPSHARD_LOG_LEVEL");
    for (const char* name : {"DEEPSHARD_KERNEL_ISA", "DEEPSHARD_ADAM_ISA"}) {
      std::optional<std::string> value = non_empty_env(name);
      if (!value) continue;
      DS_CHECK(!o.kernel_isa || *o.kernel_isa == *value, UsageError,
               "DEEPSHARD_KERNEL_ISA=", *o.kernel_isa, " and DEEPSHARD_ADAM_ISA=", *value,
               " disagree (DEEPSHARD_ADAM_ISA is the older name of DEEPSHARD_KERNEL_ISA)");
      if (!o.kernel_isa) {
        o.kernel_isa = std::move(value);
        o.kernel_isa_variable = name;
      }
    }
    o.bf16_compute = non_empty_env("DEEPSHARD_BF16_COMPUTE");
    o.linear = non_empty_env("DEEPSHARD_LINEAR");
    o.sgemm = non_empty_env("DEEPSHARD_SGEMM");
    o.heap = non_empty_env("DEEPSHARD_HEAP");
    o.users_heap_setting = users_heap_setting_from_process();
    o.blas = blas_environment_from_process();
    return o;
  }();
  return options;
}

void apply_process_options(const ProcessOptions& options) {
  platform::record_blas_environment(options.blas);
  if (!options.users_heap_setting.empty()) zero::leave_mmap_threshold_to_user();
  if (options.log_level) {
    const std::optional<log::Level> level = log::parse_level(*options.log_level);
    DS_CHECK(level.has_value(), UsageError, "DEEPSHARD_LOG_LEVEL=", *options.log_level,
             ": expected debug, info, warn or error");
    log::set_level(*level);
  }
  if (options.kernel_isa) {
    platform::force_kernel_isa_setting(options.kernel_isa_variable, *options.kernel_isa);
    kernels::follow_forced_kernel_isa_in_libtorch();
  }
  if (options.linear) {
    DS_CHECK(*options.linear == "dnnl" || *options.linear == "torch", UsageError,
             "DEEPSHARD_LINEAR=", *options.linear, ": expected dnnl (the default) or torch");
    if (*options.linear == "torch") platform::keep_torch_linear();
  }
  if (options.sgemm) platform::set_sgemm_setting(*options.sgemm);
}

kernels::Bf16ComputeChoice bf16_compute_from_environment(const ProcessOptions& options,
                                                         const platform::CpuInfo& cpu) {
  return kernels::choose_bf16_compute(
      options.bf16_compute.value_or("auto"), cpu,
      options.bf16_compute ? "DEEPSHARD_BF16_COMPUTE" : "--bf16-compute");
}

}  // namespace deepshard::cli
