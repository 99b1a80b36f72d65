// The model-state estimator (estimator.h). Per rank, with Ψ parameters, N ranks, S = ceil(Ψ/N),
// element sizes b (parameters) and g (gradient accumulation, fp32 in deepshard):
//  - parameters b·Ψ (stage 3: b·S);
//  - gradients: stages 0/1 keep autograd's flat buffer b·Ψ, plus an accumulation buffer g·Ψ when
//    g != b; stage 1 adds the reduced shard g·S; stages 2/3 keep the reduced shard g·S only;
//  - master weights 4Ψ (stages >= 1: 4S) when b != 4 (fp32 parameters are their own master);
//  - Adam state 8Ψ (stages >= 1: 8S);
//  - stage 2 stages gradients through K = (overlap_comm ? 2 : 1) buffers of the largest bucket,
//    g·min(reduce_bucket_size, Ψ) each, and with accumulation > 1 (reduce_scatter) receives into
//    K buffers of that bucket's slice;
//  - stage 3 with accumulation > 1 receives each unit's reduced slice into K buffers of the
//    largest unit's slice, g·ceil(U/N) each. The gathered parameters (root, persistent units and
//    the units running or prefetched) are not model states: the ledger counts them apart.
#include "zero/estimator.h"

#include <algorithm>
#include <cmath>

#include "deepshard/util/error.h"

namespace deepshard::zero {

int64_t dtype_bytes(config::DType dtype) {
  switch (dtype) {
    case config::DType::kFp32:
      return 4;
    case config::DType::kFp16:
      return 2;
    case config::DType::kBf16:
      return 2;
  }
  return 4;
}

EstimateInput estimate_input(const config::DsConfig& config, int64_t num_params, int64_t world_size,
                             config::DType param_dtype) {
  EstimateInput in;
  in.num_params = num_params;
  in.world_size = world_size;
  in.stage = config.zero.stage;
  in.dtype = param_dtype;
  in.grad_dtype = config::DType::kFp32;
  in.offload_optimizer = config.zero.offload_optimizer.device;
  in.offload_param = config.zero.offload_param.device;
  in.reduce_bucket_size = config.zero.reduce_bucket_size;
  in.overlap_comm = config.zero.overlap_comm;
  in.reduce_scatter = config.zero.reduce_scatter;
  in.gradient_accumulation_steps = config.gradient_accumulation_steps;
  in.sub_group_size = config.zero.sub_group_size;
  in.optimizer_buffer_count = config.zero.offload_optimizer.buffer_count;
  in.offload_ratio = config.zero.offload_optimizer.ratio;
  in.max_in_cpu = config.zero.offload_param.max_in_cpu;
  in.param_buffer_count = config.zero.offload_param.buffer_count;
  in.param_buffer_size = config.zero.offload_param.buffer_size;
  return in;
}

namespace {

void check(const EstimateInput& in) {
  DS_CHECK(in.num_params >= 0, Error, "estimate: negative parameter count");
  DS_CHECK(in.world_size >= 1, Error, "estimate: world size must be at least 1");
  DS_CHECK(in.stage >= 0 && in.stage <= 3, Error, "estimate: stage must be 0..3");
  DS_CHECK(in.gradient_accumulation_steps >= 1, Error,
           "estimate: gradient accumulation steps must be at least 1");
}

int64_t shard_of(const EstimateInput& in) {
  return (in.num_params + in.world_size - 1) / in.world_size;  // padded shard: ceil(Ψ / N)
}

}  // namespace

ModelStateEstimate estimate_model_states(const EstimateInput& in) {
  check(in);
  const int64_t full = in.num_params;
  const int64_t shard = shard_of(in);
  const int64_t b = dtype_bytes(in.dtype);
  const int64_t g = dtype_bytes(in.grad_dtype);
  const bool param_nvme = in.stage >= 3 && in.offload_param == config::OffloadDevice::kNvme;
  // A separate fp32 master: bf16/fp16 parameters, or parameters on NVMe (stage 3).
  const bool has_master = in.dtype != config::DType::kFp32 || param_nvme;

  ModelStateEstimate e;
  e.params = b * (in.stage >= 3 ? shard : full);
  if (in.stage <= 1) {
    e.grads = b * full + (g != b ? g * full : 0) + (in.stage == 1 ? g * shard : 0);
  } else {
    e.grads = g * shard;
  }
  const int64_t opt_elems = in.stage >= 1 ? shard : full;
  e.master = has_master ? 4 * opt_elems : 0;
  e.optimizer = 8 * opt_elems;
  if (in.stage == 2) {
    const int64_t buffers = in.overlap_comm ? 2 : 1;
    const int64_t bucket = in.reduce_bucket_size > 0 ? std::min(in.reduce_bucket_size, full) : full;
    e.comm_buffers = buffers * g * bucket;
    if (in.reduce_scatter && in.gradient_accumulation_steps > 1) {
      e.comm_buffers += buffers * g * ((bucket + in.world_size - 1) / in.world_size);
    }
  }
  if (in.stage == 3 && in.gradient_accumulation_steps > 1) {
    const int64_t buffers = in.overlap_comm ? 2 : 1;
    e.comm_buffers = buffers * g * ((in.largest_unit_params + in.world_size - 1) / in.world_size);
  }
  // Places. The compute device is the CPU in this build, so gradients are not copied to the host
  // for a CPU optimizer (an accelerator build would add a host copy of the gradient shard).
  auto place = [](config::OffloadDevice d, int64_t bytes) {
    PlacedBytes p;
    (d == config::OffloadDevice::kNvme  ? p.nvme
     : d == config::OffloadDevice::kCpu ? p.host
                                        : p.compute) = bytes;
    return p;
  };
  const auto param_device = in.stage >= 3 ? in.offload_param : config::OffloadDevice::kNone;
  e.params_at = place(param_device, e.params);
  if (param_nvme) {
    // Persistent units' slices and the first max_in_cpu elements of the others stay in host
    // memory; the rest is on NVMe.
    const int64_t n = in.world_size;
    const int64_t persistent = (std::min(in.persistent_params, full) + n - 1) / n;
    const int64_t kept = persistent + std::min(in.max_in_cpu, shard - persistent);
    e.params_at = {};
    e.params_at.host = b * kept;
    e.params_at.nvme = e.params - e.params_at.host;
    if (e.params_at.nvme > 0) {
      const int64_t slice = (in.largest_unit_params + n - 1) / n;
      const int64_t buffer = std::min(in.param_buffer_size, slice) * b;
      e.swap_buffers += (in.param_buffer_count + 1) * ((buffer + 4095) / 4096 * 4096);
    }
  }
  e.grads_at = place(config::OffloadDevice::kNone, e.grads);
  e.master_at = place(in.offload_optimizer, e.master);
  e.optimizer_at = place(in.offload_optimizer, e.optimizer);
  if (in.offload_optimizer != config::OffloadDevice::kNone && in.stage >= 1 && opt_elems > 0) {
    // Sub-groups of sub_group_size; offload_optimizer.ratio < 1 keeps the first
    // floor((1 - ratio) * groups) of them on the compute device (SwappedAdam's rule).
    const int64_t sgs = std::max<int64_t>(1, in.sub_group_size);
    const int64_t groups = (opt_elems + sgs - 1) / sgs;
    const auto kept = static_cast<int64_t>(
        std::floor((1.0 - in.offload_ratio) * static_cast<double>(groups)));
    const int64_t resident = std::min(opt_elems, kept * sgs);
    auto split = [&](PlacedBytes& p, int64_t bytes_per_element) {
      const int64_t away = (opt_elems - resident) * bytes_per_element;
      p = place(in.offload_optimizer, away);
      p.compute = resident * bytes_per_element;
    };
    if (has_master) split(e.master_at, 4);
    split(e.optimizer_at, 8);
    if (in.offload_optimizer == config::OffloadDevice::kNvme && resident < opt_elems) {
      // SwappedAdam: slots of (exp_avg, exp_avg_sq[, master]) of the largest swapped sub-group.
      const int64_t arrays = has_master ? 3 : 2;
      const int64_t largest = std::min(sgs, opt_elems - resident);
      const int64_t slots = std::max<int64_t>(1, in.optimizer_buffer_count / arrays);
      e.swap_buffers += slots * arrays * ((largest * 4 + 4095) / 4096 * 4096);
    }
  }
  for (const PlacedBytes* p : {&e.params_at, &e.grads_at, &e.master_at, &e.optimizer_at})
    e.offloaded += p->host + p->nvme;
  return e;
}

CommEstimate estimate_comm_per_step(const EstimateInput& in) {
  check(in);
  CommEstimate c;
  const int64_t n = in.world_size;
  const int64_t g = dtype_bytes(in.grad_dtype);
  const int64_t padded = shard_of(in) * n;
  if (in.stage == 0) {
    if (n > 1) c.all_reduce = g * in.num_params;  // once per step, at the boundary
  } else if (in.stage <= 2) {
    // Stage 1 reduces once per step; stage 2 on every micro-step.
    const int64_t reductions = in.stage == 2 ? in.gradient_accumulation_steps : 1;
    (in.reduce_scatter ? c.reduce_scatter : c.all_reduce) = reductions * g * padded;
    c.all_gather = dtype_bytes(in.dtype) * shard_of(in);
  } else {
    // Every micro-step (also on one rank: the engine's collectives are logged) reduce-scatters all
    // gradients (input: the padded full gradient) and gathers the units that are not persistent
    // twice (input: this rank's slice); the persistent ones are gathered once, after the update.
    const int64_t gas = in.gradient_accumulation_steps;
    const int64_t persistent = std::min(in.persistent_params, in.num_params);
    const int64_t released = in.num_params - persistent;
    c.reduce_scatter = gas * g * padded;
    c.all_gather =
        dtype_bytes(in.dtype) * (2 * gas * ((released + n - 1) / n) + (persistent + n - 1) / n);
  }
  return c;
}

DeepSpeedZero3Estimate deepspeed_zero3_estimate(int64_t total_params, int64_t largest_layer_params,
                                                int64_t ranks_per_node, int64_t nodes,
                                                bool cpu_offload, bool cpu_offload_params,
                                                bool zero_init, double additional_buffer_factor) {
  // The formula of DeepSpeed's function, term by term (doubles, truncated as its int()).
  const double total = static_cast<double>(total_params);
  const double largest = static_cast<double>(largest_layer_params);
  const double per_node = static_cast<double>(ranks_per_node);
  const double ranks = per_node * static_cast<double>(nodes);
  const double node_factor = 1.0 / static_cast<double>(nodes);
  const double f = additional_buffer_factor;
  DeepSpeedZero3Estimate e;
  e.largest_layer = 4 * largest_layer_params;
  double cpu = 0, device = 0;
  if (cpu_offload) {
    const double per_param = cpu_offload_params ? 18 : 16;
    device = static_cast<double>(e.largest_layer) +
             (cpu_offload_params ? 0.0 : static_cast<double>(static_cast<int64_t>(2 * total / ranks)));
    cpu = zero_init ? total * per_param * node_factor * f
                    : total * std::max(4 * per_node, per_param * node_factor) * f;
  } else {
    device = static_cast<double>(e.largest_layer) +
             static_cast<double>(static_cast<int64_t>(18 * total / ranks));
    cpu = zero_init ? largest * 4 * per_node * f : total * 4 * per_node * f;
  }
  e.cpu_per_node = static_cast<int64_t>(cpu);
  e.device_per_rank = static_cast<int64_t>(device);
  return e;
}

}  // namespace deepshard::zero
