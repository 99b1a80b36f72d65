// Implementation of the stage-1/2 engine (see sharded_optimizer_engine.h).
#include "zero/engines/sharded_optimizer_engine.h"

#include <torch/torch.h>

#include <cmath>
#include <deque>

#include "comm/powersgd.h"
#include "deepshard/util/error.h"
#include "util/log.h"
#include "zero/grad_compression.h"
#include "zero/grad_norm.h"
#include "zero/grad_ready_hooks.h"
#include "zero/offload_notes.h"

namespace deepshard::zero {

ShardedOptimizerEngine::ShardedOptimizerEngine(std::shared_ptr<torch::nn::Module> model,
                                               const config::DsConfig& config, comm::Group& group,
                                               bool partition_grads)
    : EngineBase(std::move(model), config, group), partition_grads_(partition_grads) {
  const int64_t bucket_numel = config_.zero.reduce_bucket_size;
  flat_ = std::make_unique<FlatParams>(
      *model_,
      [&](const std::vector<int64_t>& numels) {
        layout_ = std::make_unique<ShardLayout>(numels, bucket_numel, group_.size());
        return FlatParams::Placement{layout_->slot_offsets(), layout_->padded_numel()};
      },
      /*grad_buffer=*/!partition_grads_);
  num_parameters_ = flat_->numel();
  const at::Tensor& params = flat_->params();
  const int64_t elem = params.element_size();
  low_precision_params_ = params.scalar_type() != at::kFloat;
  ledger_.allocate(MemoryCategory::kParameters, flat_->padded_numel() * elem);

  // Every rank starts from rank 0's parameters, as DeepSpeed does.
  group_.broadcast(params, 0);

  const int64_t shard = layout_->shard_numel();
  const auto& buckets = layout_->buckets();
  const auto fp32 = params.options().dtype(at::kFloat);
  const size_t in_flight = config_.zero.overlap_comm ? 2 : 1;
  if (partition_grads_) {
    staging_ = std::make_unique<GradStaging>(*layout_, flat_->entries(), in_flight, fp32);
    ledger_.allocate(MemoryCategory::kCommBuffers, staging_->bytes());
  } else {
    // Stage 1: autograd accumulates into the full flat gradient buffer.
    ledger_.allocate(MemoryCategory::kGradients, flat_->padded_numel() * elem);
    reduce_source_ = flat_->grads();
    if (low_precision_params_)
      allocate(MemoryCategory::kGradients, reduce_source_, flat_->padded_numel(), fp32);
  }
  allocate(MemoryCategory::kGradients, grad_shard_, shard, fp32);
  // offload_optimizer: the master, Adam state and the gradients they read live on the offload
  // device (host memory); gradients are copied there bucket by bucket when it is another device.
  const config::OffloadConfig& offload = config_.zero.offload_optimizer;
  const bool nvme = offload.device == config::OffloadDevice::kNvme;
  const at::Device offload_device = offload.enabled() ? at::Device(at::kCPU) : params.device();
  if (offload_device != params.device()) {
    host_grads_ = at::zeros({shard}, fp32.device(offload_device));
    ledger_.allocate(MemoryCategory::kGradients, shard * 4, MemoryPlace::kHost);
  }
  log_offload_notes(config_, params.device(), comm::job_rank(group_.info()));
  if (low_precision_params_ && !nvme) {
    allocate(MemoryCategory::kMasterWeights, master_, shard, fp32.device(offload_device),
             offload.enabled() ? MemoryPlace::kHost : MemoryPlace::kCompute);
    torch::NoGradGuard no_grad;
    for (size_t b = 0; b < buckets.size(); ++b) {
      master_.narrow(0, buckets[b].shard_offset, buckets[b].shard_numel)
          .copy_(params.narrow(0, layout_->owned_offset(b, group_.rank()), buckets[b].shard_numel));
    }
  }
  if (partition_grads_ && config_.zero.reduce_scatter && config_.gradient_accumulation_steps > 1) {
    int64_t largest = 0;
    for (const auto& b : buckets) largest = std::max(largest, b.shard_numel);
    receive_.resize(in_flight);
    for (auto& r : receive_) allocate(MemoryCategory::kCommBuffers, r, largest, fp32);
  }

  std::vector<double> decay;
  for (const auto& e : flat_->entries())
    decay.push_back(e.decay ? config_.optimizer.weight_decay : 0.0);
  adam_ = std::make_unique<optim::FlatAdam>(
      config_.optimizer, shard,
      layout_->shard_ranges(group_.rank(), decay, /*in_flat_buffer=*/!low_precision_params_),
      /*host_state=*/!nvme);
  if (nvme) {
    // Swap folders are named by the job's rank: a data-parallel group is one of several under
    // tensor or pipeline parallelism.
    swapped_ = std::make_unique<SwappedAdam>(
        config_, comm::job_rank(group_.info()), *adam_, low_precision_params_,
        offload::split_sub_groups(shard, config_.zero.sub_group_size),
        [this](int64_t lo, int64_t n, float* out) {
          for_shard_window(lo, n, [&](int64_t shard_at, int64_t flat_at, int64_t len) {
            at::from_blob(out + (shard_at - lo), {len}, at::TensorOptions(at::kFloat))
                .copy_(flat_->params().narrow(0, flat_at, len));
          });
        });
    ledger_.allocate(MemoryCategory::kOptimizerState, 2 * shard * 4, MemoryPlace::kNvme);
    if (low_precision_params_)
      ledger_.allocate(MemoryCategory::kMasterWeights, shard * 4, MemoryPlace::kNvme);
    ledger_.allocate(MemoryCategory::kSwapBuffers, swapped_->held_bytes(), MemoryPlace::kHost);
  } else {
    ledger_.allocate(MemoryCategory::kOptimizerState, 2 * shard * 4,
                     offload.enabled() ? MemoryPlace::kHost : MemoryPlace::kCompute);
  }

  std::vector<GradBuckets::Slot> ranges;
  std::vector<size_t> bucket_of_slot;
  for (size_t b = 0; b < buckets.size(); ++b) {
    ranges.push_back({buckets[b].offset, buckets[b].numel});
    bucket_of_slot.insert(bucket_of_slot.end(), buckets[b].num_slots, b);
  }
  reduction_ = make_grad_reduction(group_, config_);
  buckets_ = std::make_unique<GradBuckets>(ranges, bucket_of_slot, [this](int64_t offset, int64_t) {
    return start_reduction(layout_->bucket_at(offset));
  });
  buckets_->set_completion([this](size_t b) { complete_reduction(b); });
  // Without overlap_comm a reduction completes before the next starts (DeepSpeed reduces
  // synchronously then); with it, two may be in flight (its double-buffered IPG bucket). Stage 2
  // fills staging buffer b % in_flight for bucket b, free once bucket b - in_flight completed.
  buckets_->set_max_in_flight(in_flight);
  accumulators_ =
      add_grad_ready_hooks(flat_->entries(), [this](size_t slot) { on_grad_ready(slot); });
  // Stage 1 only (the config refuses compression at stage 2): the whole buffer is all-reduced.
  if (!partition_grads_) {
    compression_ = make_grad_compression(group_, config_, flat_->entries(), flat_->padded_numel());
    if (compression_) ledger_.allocate(MemoryCategory::kCommBuffers, compression_->buffer_bytes(4));
  }
}

ShardedOptimizerEngine::~ShardedOptimizerEngine() = default;

void ShardedOptimizerEngine::allocate(MemoryCategory category, at::Tensor& buffer, int64_t numel,
                                      const at::TensorOptions& options, MemoryPlace place) {
  buffer = at::zeros({numel}, options);
  ledger_.allocate(category, numel * buffer.element_size(), place);
}

void ShardedOptimizerEngine::for_shard_window(
    int64_t lo, int64_t n, const std::function<void(int64_t, int64_t, int64_t)>& fn) const {
  const auto& buckets = layout_->buckets();
  for (size_t b = 0; b < buckets.size(); ++b) {
    const int64_t a = std::max(lo, buckets[b].shard_offset);
    const int64_t e = std::min(lo + n, buckets[b].shard_offset + buckets[b].shard_numel);
    if (a >= e) continue;
    fn(a, layout_->owned_offset(b, group_.rank()) + (a - buckets[b].shard_offset), e - a);
  }
}

void ShardedOptimizerEngine::publish_master(int64_t lo, int64_t n, const float* master) {
  // The same rounding as the in-RAM path's master.to(dtype).
  for_shard_window(lo, n, [&](int64_t shard_at, int64_t flat_at, int64_t len) {
    flat_->params()
        .narrow(0, flat_at, len)
        .copy_(at::from_blob(const_cast<float*>(master) + (shard_at - lo), {len},
                             at::TensorOptions(at::kFloat)));
  });
}

void ShardedOptimizerEngine::on_grad_ready(size_t slot) {
  // contiguous_gradients: move the gradient into its bucket's staging buffer as soon as that
  // buffer is free, releasing autograd's .grad early; otherwise (or while the buffer is still being
  // reduced) the .grad stays until the bucket's reduction starts, and fill() copies it then.
  if (staging_ && buckets_->active() && config_.zero.contiguous_gradients) {
    const size_t b = staging_->bucket_of(slot);
    if (b < staging_->count() || buckets_->completed(b - staging_->count()))
      staging_->copy_in(slot);
  }
  buckets_->mark_ready(slot);
}

void ShardedOptimizerEngine::before_backward(bool boundary) {
  first_micro_step_ = micro_steps() % config_.gradient_accumulation_steps == 0;
  last_micro_step_ = boundary;
  // Stage 2 reduces every micro-step from the hooks (converting to fp32 bucket by bucket); stage 1
  // with a bf16/fp16 model reduces the fp32 buffer, complete only after backward; so does stage 1
  // with compression, which needs the whole gradient.
  if (partition_grads_ || (boundary && !low_precision_params_ && !compression_)) buckets_->begin();
}

void ShardedOptimizerEngine::after_backward(bool boundary) {
  if (!partition_grads_ && low_precision_params_) flat_->accumulate_grads_into(reduce_source_);
  if (compression_) {
    if (!boundary) return;
    compression_->all_reduce_mean(reduce_source_, global_steps());
    for (size_t b = 0; b < layout_->buckets().size(); ++b) take_reduced(b, /*whole_bucket=*/true);
    return;
  }
  if (!partition_grads_ && low_precision_params_ && boundary) buckets_->begin();
  buckets_->finish();
}

at::Tensor ShardedOptimizerEngine::reduce_input(size_t bucket) const {
  if (staging_) return staging_->region(bucket);
  const ShardBucket& b = layout_->buckets()[bucket];
  return reduce_source_.narrow(0, b.offset, b.numel);
}

comm::Work ShardedOptimizerEngine::start_reduction(size_t bucket) {
  const ShardBucket& b = layout_->buckets()[bucket];
  const at::Tensor in = staging_ ? staging_->fill(bucket) : reduce_input(bucket);
  // reduce_scatter false: DeepSpeed's all-reduce of the whole bucket; the owned slice is taken
  // from it on completion.
  if (!config_.zero.reduce_scatter) return reduction_->all_reduce_mean_async(in);
  // Stage 1 reduces once per window and stage 2's first micro-step starts the sum: straight into
  // the shard. Later stage-2 micro-steps receive aside and add on completion.
  const bool into_shard = !partition_grads_ || first_micro_step_;
  const at::Tensor out = into_shard
                             ? grad_shard_.narrow(0, b.shard_offset, b.shard_numel)
                             : receive_[bucket % receive_.size()].narrow(0, 0, b.shard_numel);
  return reduction_->reduce_scatter_mean_async(out, in);
}

void ShardedOptimizerEngine::complete_reduction(size_t bucket) {
  reduction_->complete_next();  // the wire dtype's cast back
  take_reduced(bucket, /*whole_bucket=*/!config_.zero.reduce_scatter);
}

void ShardedOptimizerEngine::take_reduced(size_t bucket, bool whole_bucket) {
  torch::NoGradGuard no_grad;
  const ShardBucket& b = layout_->buckets()[bucket];
  const at::Tensor shard = grad_shard_.narrow(0, b.shard_offset, b.shard_numel);
  const bool into_shard = !partition_grads_ || first_micro_step_;
  if (whole_bucket) {
    const at::Tensor owned =
        reduce_input(bucket).narrow(0, group_.rank() * b.shard_numel, b.shard_numel);
    if (into_shard) {
      shard.copy_(owned);
    } else {
      shard.add_(owned);
    }
  } else if (!into_shard) {
    shard.add_(receive_[bucket % receive_.size()].narrow(0, 0, b.shard_numel));
  }
  // offload_optimizer on another device than the compute device: this bucket's reduced gradients
  // go to host memory now (the last micro-step of the window has the complete sum).
  if (host_grads_.defined() && (!partition_grads_ || last_micro_step_))
    host_grads_.narrow(0, b.shard_offset, b.shard_numel).copy_(shard, /*non_blocking=*/true);
}

at::Tensor ShardedOptimizerEngine::owned_params(size_t bucket) const {
  const ShardBucket& b = layout_->buckets()[bucket];
  // fp32 (updated in place) or nvme (published into the parameters sub-group by sub-group).
  if (!master_.defined()) {
    return flat_->params().narrow(0, layout_->owned_offset(bucket, group_.rank()), b.shard_numel);
  }
  return master_.narrow(0, b.shard_offset, b.shard_numel).to(flat_->params().options());
}

void ShardedOptimizerEngine::all_gather_params() {
  const at::Tensor& params = flat_->params();
  const auto& buckets = layout_->buckets();
  // allgather_bucket_size bounds the elements being gathered at once (a larger bucket goes alone).
  const int64_t limit = config_.zero.allgather_bucket_size;
  std::deque<std::pair<comm::Work, int64_t>> works;
  int64_t in_flight = 0;
  for (size_t i = 0; i < buckets.size(); ++i) {
    const ShardBucket& b = buckets[i];
    while (!works.empty() && in_flight + b.numel > limit) {
      works.front().first.wait();
      in_flight -= works.front().second;
      works.pop_front();
    }
    works.emplace_back(
        group_.all_gather_async(params.narrow(0, b.offset, b.numel), owned_params(i)), b.numel);
    in_flight += b.numel;
  }
  for (auto& w : works) w.first.wait();
}

at::Tensor ShardedOptimizerEngine::accumulated_grad(const std::string& name) {
  // Stage 2 keeps no whole gradient buffer (its buckets are reduced during backward).
  if (partition_grads_) return EngineBase::accumulated_grad(name);
  return flat_->view_of(reduce_source_, name);
}

at::Tensor ShardedOptimizerEngine::reduced_grads() { return grad_shard_; }

void ShardedOptimizerEngine::reduced_grads_changed() {
  if (host_grads_.defined()) host_grads_.copy_(grad_shard_);
}

double ShardedOptimizerEngine::global_grad_norm(const at::Tensor& reduced) {
  return sharded_l2_norm(group_, reduced);
}

std::vector<EngineBase::GradPiece> ShardedOptimizerEngine::reduced_pieces() const {
  std::vector<GradPiece> pieces;
  for (const OwnedPiece& p : layout_->owned_pieces(group_.rank())) {
    pieces.push_back({&flat_->entries()[p.slot].name, p.shard_offset, p.numel, p.param_begin});
  }
  return pieces;
}

void ShardedOptimizerEngine::update_parameters(const UpdateRates& rates, float grad_factor) {
  if (rates.beta1) adam_->set_beta1(*rates.beta1);
  if (rates.beta2) adam_->set_beta2(*rates.beta2);
  staged_master_ = staged_exp_avg_ = staged_exp_avg_sq_ = at::Tensor();
  const at::Tensor grads = host_grads_.defined() ? host_grads_ : grad_shard_;
  if (swapped_) {
    swapped_->step(group_, grads, low_precision_params_ ? at::Tensor() : flat_->params(), rates.lr,
                   grad_factor, [this](int64_t lo, int64_t n, const float* master) {
                     publish_master(lo, n, master);
                   });
  } else {
    // fp32: the ranges point into the parameter buffer (param_offset), updated in place.
    adam_->step(master_.defined() ? master_ : flat_->params(), grads, rates.lr, grad_factor);
  }
  all_gather_params();
}

void ShardedOptimizerEngine::zero_grads() {
  // Stage 2's staging buffers are refilled every micro-step; the shard is reduced into afresh
  // (overwritten) by the window's first micro-step.
  if (reduce_source_.defined()) reduce_source_.zero_();
}

void ShardedOptimizerEngine::stage_swapped_state(bool read) {
  // The whole shard's state in RAM for the checkpoint's duration (released at the next step).
  const int64_t shard = layout_->shard_numel();
  const auto fp32 = at::TensorOptions(at::kFloat);
  staged_exp_avg_ = at::zeros({shard}, fp32);
  staged_exp_avg_sq_ = at::zeros({shard}, fp32);
  staged_master_ = low_precision_params_ ? at::zeros({shard}, fp32) : at::Tensor();
  if (read) swapped_->read_all(staged_master_, staged_exp_avg_, staged_exp_avg_sq_);
}

std::vector<EngineBase::StatePiece> ShardedOptimizerEngine::state_view(StateUse use) {
  // Saving and loading both cover exactly the owned pieces.
  if (swapped_) stage_swapped_state(/*read=*/use == StateUse::kSave);
  const at::Tensor& master_shard = swapped_ ? staged_master_ : master_;
  const at::Tensor& exp_avg = swapped_ ? staged_exp_avg_ : adam_->exp_avg();
  const at::Tensor& exp_avg_sq = swapped_ ? staged_exp_avg_sq_ : adam_->exp_avg_sq();
  std::vector<StatePiece> out;
  for (const OwnedPiece& p : layout_->owned_pieces(group_.rank())) {
    const FlatParamEntry& e = flat_->entries()[p.slot];
    const at::Tensor master = master_shard.defined()
                                  ? master_shard.narrow(0, p.shard_offset, p.numel)
                                  : flat_->params().narrow(0, p.flat_offset, p.numel);
    out.push_back({e.name, p.param_begin, p.param_begin + p.numel, master,
                   exp_avg.narrow(0, p.shard_offset, p.numel),
                   exp_avg_sq.narrow(0, p.shard_offset, p.numel)});
  }
  return out;
}

void ShardedOptimizerEngine::publish_loaded_state() {
  if (swapped_) {
    swapped_->write_all(staged_master_, staged_exp_avg_, staged_exp_avg_sq_);
    if (staged_master_.defined())
      publish_master(0, layout_->shard_numel(), staged_master_.data_ptr<float>());
    staged_master_ = staged_exp_avg_ = staged_exp_avg_sq_ = at::Tensor();
  }
  all_gather_params();
}

}  // namespace deepshard::zero
