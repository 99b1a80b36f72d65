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
#include "deepshard/zero/estimator.h"

#include <algorithm>

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
  const bool has_master = in.dtype != config::DType::kFp32;

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
  if (in.offload_optimizer != config::OffloadDevice::kNone) e.offloaded += e.master + e.optimizer;
  if (in.offload_param != config::OffloadDevice::kNone && in.stage >= 3) e.offloaded += e.params;
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

}  // namespace deepshard::zero
