// The start-up lines of offload (rank 0): what each offload choice means on this compute device,
// and which offload keys have no effect here, each named (docs/offload.md).
#pragma once

#include <c10/core/Device.h>

#include "deepshard/config/ds_config.h"

namespace deepshard::zero {

// `compute`: the device the parameters live on. `stage`: 1-2 (offload_param unused) or 3.
void log_offload_notes(const config::DsConfig& config, const c10::Device& compute, int rank);

}  // namespace deepshard::zero
