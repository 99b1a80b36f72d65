// Model-state memory per rank for ZeRO stages 0-3 (../shared/design.md §4, DeepSpeed's estimator
// semantics), counted as deepshard allocates it: what parameters, gradients, fp32 master weights
// and Adam state take on each rank, split into what stays on the device and what is offloaded to
// host memory or NVMe; the communication staging buffers beside them; and the bytes each
// collective moves per optimizer step, as the comm log counts them. For a run, the engine's
// MemoryLedger must show the same quantities (tests/train/memory_report_test.cpp).
#pragma once

#include <cstdint>

#include "deepshard/config/ds_config.h"

namespace deepshard::zero {

struct ModelStateEstimate {
  int64_t params = 0;     // bytes of parameters per rank (compute dtype)
  int64_t grads = 0;      // bytes of gradient buffers per rank
  int64_t master = 0;     // bytes of fp32 master weights (0 when compute dtype is fp32)
  int64_t optimizer = 0;  // bytes of Adam exp_avg + exp_avg_sq (fp32)
  int64_t offloaded = 0;  // of the above, bytes living in host memory / NVMe instead of the device
  // Not model states: stage 2's bucket-sized gradient staging and receive buffers.
  int64_t comm_buffers = 0;
  int64_t total() const { return params + grads + master + optimizer; }
  int64_t on_device() const { return total() - offloaded; }
};

struct EstimateInput {
  int64_t num_params = 0;
  int64_t world_size = 1;
  int stage = 0;
  config::DType dtype = config::DType::kFp32;       // compute dtype of parameters
  config::DType grad_dtype = config::DType::kFp32;  // dtype gradients are accumulated in
  config::OffloadDevice offload_optimizer = config::OffloadDevice::kNone;
  config::OffloadDevice offload_param = config::OffloadDevice::kNone;
  // What sizes stage 2's staging buffers and the collectives of a step.
  int64_t reduce_bucket_size = 0;  // elements; 0: one bucket for everything
  bool overlap_comm = false;       // two buffers (reductions in flight) instead of one
  bool reduce_scatter = true;      // false: buckets are all-reduced
  int64_t gradient_accumulation_steps = 1;
};

// The input for a run: its config, parameter count, world size and the parameters' dtype (fp16
// on CPU keeps fp32 parameters, so it is given, not derived from the config).
EstimateInput estimate_input(const config::DsConfig& config, int64_t num_params, int64_t world_size,
                             config::DType param_dtype);

// Shards are padded as deepshard pads them: to a multiple of world_size elements (per bucket in
// stages 1/2: up to world_size - 1 more elements per bucket than estimated here).
ModelStateEstimate estimate_model_states(const EstimateInput& input);

// Bytes per optimizer step handed to each collective by one rank (what the comm log records:
// all_reduce and reduce_scatter count their input, all_gather its input, the owned shard), and
// design §4's bytes moved: an all-reduce moves its payload twice (reduce-scatter + all-gather),
// an all-gather N times its input. Stages 0-2; stage 3 is not modelled here (zeros).
struct CommEstimate {
  int64_t all_reduce = 0;
  int64_t reduce_scatter = 0;
  int64_t all_gather = 0;
  int64_t moved(int64_t world_size) const {
    return 2 * all_reduce + reduce_scatter + world_size * all_gather;
  }
};
CommEstimate estimate_comm_per_step(const EstimateInput& input);

int64_t dtype_bytes(config::DType dtype);

}  // namespace deepshard::zero
