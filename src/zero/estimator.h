// Model-state memory per rank for ZeRO stages 0-3 (docs/design.md §4, DeepSpeed's estimator
// semantics), counted as deepshard allocates it: what parameters, gradients, fp32 master weights
// and Adam state take on each rank, split into what stays on the device and what is offloaded to
// host memory or NVMe; the communication staging buffers beside them; and the bytes each
// collective moves per optimizer step, as the comm log counts them. For a run, the engine's
// MemoryLedger must show the same quantities (tests/train/memory_report_test.cpp).
#pragma once

#include <cstdint>

#include "deepshard/config/ds_config.h"
#include "deepshard/zero/memory_ledger.h"

namespace deepshard::zero {

// Bytes of one category by place (compute device, host memory, NVMe files).
struct PlacedBytes {
  int64_t compute = 0, host = 0, nvme = 0;
  int64_t at(MemoryPlace place) const {
    return place == MemoryPlace::kHost ? host : place == MemoryPlace::kNvme ? nvme : compute;
  }
};

struct ModelStateEstimate {
  int64_t params = 0;     // bytes of parameters per rank (compute dtype)
  int64_t grads = 0;      // bytes of gradient buffers per rank
  int64_t master = 0;     // bytes of fp32 master weights (0 when compute dtype is fp32)
  int64_t optimizer = 0;  // bytes of Adam exp_avg + exp_avg_sq (fp32)
  int64_t offloaded = 0;  // of the above, bytes living in host memory / NVMe instead of the device
  // Not model states: stage 2's bucket-sized gradient staging and receive buffers; stage 3's
  // receive buffer (one unit's slice) with accumulation.
  int64_t comm_buffers = 0;
  // offload to NVMe: the reusable aligned buffers of the swapping (host memory; not model states).
  int64_t swap_buffers = 0;
  // Where each category lives (the engine's MemoryLedger records the same places).
  PlacedBytes params_at, grads_at, master_at, optimizer_at;
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
  // Stage 3 (from the engine; 0 when unknown): the elements that stay gathered (root unit and
  // persistent units: gathered once per step, after the update, instead of for every forward and
  // backward) and the largest unit's (its slice is the accumulation receive buffer).
  int64_t persistent_params = 0;
  int64_t largest_unit_params = 0;
  // offload_optimizer nvme: the sub-group size and buffer count size the swap buffers.
  int64_t sub_group_size = 1'000'000'000;
  int64_t optimizer_buffer_count = 4;
  double offload_ratio = 1.0;  // offload_optimizer.ratio (stage 3)
  // offload_param nvme (stage 3): slices of units that are not persistent beyond max_in_cpu
  // elements go to NVMe, through buffer_count (+1 for writing) buffers of min(buffer_size, the
  // largest unit's slice) elements.
  int64_t max_in_cpu = 1'000'000'000;
  int64_t param_buffer_count = 5;
  int64_t param_buffer_size = 100'000'000;
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
// an all-gather N times its input. Stage 3 gathers every unit that is not persistent for each
// forward and again for each backward (units released in between: stage3_max_reuse_distance 0),
// the persistent ones once per step, and reduce-scatters every gradient on every micro-step: about
// 3x the parameter bytes moved per micro-step.
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

// DeepSpeed's own figure, for comparison: deepspeed.runtime.zero.stage3.
// estimate_zero3_model_states_mem_needs(total_params, largest_layer_params, num_gpus_per_node,
// num_nodes, cpu_offload, cpu_offload_params, zero_init, additional_buffer_factor), the same
// formula: host memory per node and device memory per rank (fp16 parameters, 18 bytes of model
// states per parameter, the largest layer's fp32 gathered on the device, host figures times 1.5).
// It has no NVMe case: what deepshard puts on NVMe, it counts in host memory.
struct DeepSpeedZero3Estimate {
  int64_t cpu_per_node = 0;
  int64_t device_per_rank = 0;
  int64_t largest_layer = 0;  // bytes: 4 * largest_layer_params
};
DeepSpeedZero3Estimate deepspeed_zero3_estimate(int64_t total_params, int64_t largest_layer_params,
                                                int64_t ranks_per_node, int64_t nodes,
                                                bool cpu_offload, bool cpu_offload_params,
                                                bool zero_init = true,
                                                double additional_buffer_factor = 1.5);

}  // namespace deepshard::zero
