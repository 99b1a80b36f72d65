// Implementation of the stage-3 engine (see stage3_engine.h).
#include "zero/engines/stage3_engine.h"

#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "deepshard/util/error.h"
#include "deepshard/zero/partitioned_build.h"
#include "util/log.h"
#include "zero/grad_norm.h"
#include "zero/offload_notes.h"
#include "zero/stage3/pre_backward.h"
#include "zero/stage3/storage_resize.h"

namespace deepshard::zero {

Stage3Engine::Stage3Engine(std::shared_ptr<torch::nn::Module> model, const config::DsConfig& config,
                           comm::Group& group, PartitionedBuild* build)
    : EngineBase(std::move(model), config, group),
      mics_(MicsGroups::create(group, config.zero)),
      shard_group_(mics_ ? mics_->shard() : group),
      declared_(declared_plan(*model_)),
      plan_(resolve_units(*model_, declared_)) {
  // The full parameter storage the units replace must leave the process (storage_resize.h).
  return_large_frees_to_os();
  if (mics_) {
    DS_CHECK(build == nullptr, ConfigError,
             "zero_optimization.mics_shard_size with a model built under zero.Init (partitioned "
             "over the whole group as it was built): not supported yet; build the model whole");
    mics_->broadcast_parameters(*model_);
  }
  create_units(build);
  place_slices();
  create_optimizer();
  add_unit_hooks();
  install_unit_wrapper();
  // The model is partitioned: from here on, freed activations are reused (storage_resize.h).
  keep_freed_memory_for_reuse();
}

void Stage3Engine::create_units(PartitionedBuild* build) {
  for (size_t i = 0; i < plan_.units.size(); ++i) {
    auto& spec = plan_.units[i];
    std::unique_ptr<Stage3Unit> unit = build != nullptr ? build->take_unit(spec.declared) : nullptr;
    prebuilt_.push_back(unit != nullptr);
    if (unit != nullptr) {
      unit->adopt(spec.name, spec.params);
    } else {
      unit = std::make_unique<Stage3Unit>(spec.name, std::move(spec.params), shard_group_.size());
    }
    num_parameters_ += unit->numel();
    units_.push_back(std::move(unit));
  }
}

void Stage3Engine::place_slices() {
  low_precision_params_ = units_[0]->options().dtype() != at::kFloat;
  log_offload_notes(config_, units_[0]->options().device(), comm::job_rank(group_.info()));
  std::vector<bool> persistent = persistent_units(units_, config_.zero);
  slices_ = std::make_unique<SliceStore>(units_, persistent, config_, shard_group_, ledger_);
  if (config_.zero.zero_hpz_partition_size > 1) {
    secondary_ = std::make_unique<SecondaryPartitions>(
        shard_group_, config_.zero.zero_hpz_partition_size, units_.size(), ledger_);
  }
  coordinator_ =
      std::make_unique<UnitCoordinator>(units_, std::move(persistent), *slices_, config_.zero,
                                        shard_group_, ledger_, unit_names(), secondary_.get());
  for (size_t u = 0; u < units_.size(); ++u) {
    slices_->place(u, prebuilt_[u], shard_group_);
    coordinator_->settle(u, prebuilt_[u]);
  }
}

void Stage3Engine::create_optimizer() {
  const int rank = shard_group_.rank();
  const int64_t shard_numel = slices_->shard_numel();
  const auto options = units_[0]->options().requires_grad(false);
  const config::OffloadConfig& offload_opt = config_.zero.offload_optimizer;
  // offload_optimizer: the master and Adam state on the host (cpu), or swapped per sub-group
  // (nvme; with ratio < 1 the first sub-groups stay resident on the compute device).
  const bool opt_nvme = offload_opt.device == config::OffloadDevice::kNvme;
  const auto groups = offload::split_sub_groups(shard_numel, config_.zero.sub_group_size);
  int64_t resident = shard_numel;  // elements whose optimizer state stays on the compute device
  if (offload_opt.enabled()) {
    resident = 0;
    const size_t k = SwappedAdam::resident_groups(config_, groups.size());
    for (size_t i = 0; i < k; ++i) resident += groups[i].numel;
  }
  const MemoryPlace away = opt_nvme ? MemoryPlace::kNvme : MemoryPlace::kHost;
  auto place_state = [&](MemoryCategory category, int64_t bytes_per_element) {
    if (resident > 0) ledger_.allocate(category, resident * bytes_per_element);
    if (shard_numel > resident)
      ledger_.allocate(category, (shard_numel - resident) * bytes_per_element, away);
  };
  // A separate fp32 master: bf16/fp16 parameters, or parameters on NVMe (not all in the shard
  // buffer).
  master_swapped_ = opt_nvme && (low_precision_params_ || slices_->swaps());
  master_ = slices_->shard();
  if (low_precision_params_ || slices_->swaps()) {
    if (!opt_nvme) {
      master_ = torch::zeros({shard_numel}, options.dtype(at::kFloat));
      slices_->read(0, shard_numel, master_.data_ptr<float>());
    }
    place_state(MemoryCategory::kMasterWeights, 4);
  }
  reducer_ = std::make_unique<GradReducer>(units_, *slices_, config_, shard_group_, ledger_);

  std::vector<optim::ParamRange> ranges;
  for (size_t u = 0; u < units_.size(); ++u) {
    for (auto r : units_[u]->slice_ranges(rank, config_.optimizer.weight_decay)) {
      r.offset += slices_->slice_offset(u);
      ranges.push_back(r);
    }
  }
  adam_ = std::make_unique<optim::FlatAdam>(config_.optimizer, shard_numel, std::move(ranges),
                                            /*host_state=*/!opt_nvme);
  place_state(MemoryCategory::kOptimizerState, 8);
  if (opt_nvme) {
    swapped_ = std::make_unique<SwappedAdam>(
        config_, comm::job_rank(group_.info()), *adam_, master_swapped_, groups,
        [this](int64_t lo, int64_t n, float* out) { slices_->read(lo, n, out); });
    ledger_.allocate(MemoryCategory::kSwapBuffers, swapped_->held_bytes(), MemoryPlace::kHost);
  }
}

void Stage3Engine::add_unit_hooks() {
  for (size_t u = 0; u < units_.size(); ++u) {
    pre_backward_.push_back([this, u] {
      --forwards_pending_;
      before_unit_backward(u);
    });
    for (const auto& e : units_[u]->params()) {
      auto accumulator = torch::autograd::impl::grad_accumulator(e.param);
      DS_ASSERT(accumulator != nullptr, "no grad accumulator for ", e.name);
      accumulator->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
          [this, u](const torch::autograd::variable_list& outputs,
                    const torch::autograd::variable_list&) {
            on_grad_ready(u);
            return outputs;
          }));
      accumulators_.push_back(std::move(accumulator));
    }
  }
}

void Stage3Engine::install_unit_wrapper() {
  wrapper_id_ = declared_.calls().add(
      [this](size_t unit, const sharding::UnitBody& body) { return run_unit(unit, body); },
      sharding::kShardingLevel);
}

std::vector<std::string> Stage3Engine::unit_names() const {
  std::vector<std::string> names;
  for (const auto& u : plan_.units) names.push_back(u.name);
  return names;
}

Stage3Engine::~Stage3Engine() {
  // The model's released units keep their shapes but no data from here on.
  declared_.calls().remove(wrapper_id_);
}

void Stage3Engine::with_full_parameters(const std::function<void()>& fn) {
  DS_CHECK(!in_backward_, Error, "ZeRO-3: with_full_parameters() inside a backward");
  coordinator_->gather_all();
  holding_all_ = true;  // a forward inside fn neither gathers nor releases
  try {
    fn();
  } catch (...) {
    holding_all_ = false;
    throw;
  }
  holding_all_ = false;
  coordinator_->reshard_all();
}

int64_t Stage3Engine::persistent_parameters() const {
  int64_t n = 0;
  for (size_t u = 0; u < units_.size(); ++u)
    n += coordinator_->persistent(u) ? units_[u]->numel() : 0;
  return n;
}

void Stage3Engine::set_model_parallel(ModelParallelAxis axis) {
  DS_CHECK(!mics_, ConfigError,
           "zero_optimization.mics_shard_size with model parallelism (tensor_parallel.size > 1 "
           "or pipeline.stages > 1): not supported yet");
  DS_CHECK(!config_.zero.zero_quantized_gradients, ConfigError,
           "zero_optimization.zero_quantized_gradients with model parallelism "
           "(tensor_parallel.size > 1 or pipeline.stages > 1): not supported yet (the quantized "
           "reduction's node groups are laid out for the whole job's ranks)");
  EngineBase::set_model_parallel(std::move(axis));
}

int64_t Stage3Engine::largest_unit_parameters() const {
  int64_t n = 0;
  for (const auto& u : units_) n = std::max(n, u->numel());
  return n;
}

at::Tensor Stage3Engine::run_unit(size_t declared, const std::function<at::Tensor()>& body) {
  DS_CHECK(declared < plan_.engine_unit.size(), Error, "ZeRO-3: the model ran unit ", declared,
           " through its UnitCalls, but its sharding plan declares ", plan_.engine_unit.size(),
           " units");
  const size_t u = plan_.engine_unit[declared];
  // Nothing to gather: a unit with nothing trainable, the root (always gathered), or everything.
  if (u == UnitPlan::kUngathered || u == 0 || holding_all_) return body();
  // Only training forwards are part of the trace (an evaluation has no backward to pair with).
  if (!torch::GradMode::is_enabled()) {
    coordinator_->gather(u);
    at::Tensor out = body();
    coordinator_->reshard(u);
    return out;
  }
  coordinator_->fetch(u);
  at::Tensor out = body();
  coordinator_->release_unless_reused(u, /*backward_follows=*/true);
  ++forwards_pending_;
  return run_before_backward(out, &pre_backward_[u]);
}

void Stage3Engine::before_backward(bool) {
  reducer_->begin_backward(micro_steps() % config_.gradient_accumulation_steps == 0);
  in_backward_ = true;
  // The root's outputs are not wrapped: its gradients start with the backward.
  before_unit_backward(0);
}

void Stage3Engine::before_unit_backward(size_t u) {
  if (!in_backward_ || units_[u]->grads_begun() || reducer_->reduced(u)) {
    coordinator_->gather(u);  // a backward the engine does not drive: the unit then stays gathered
    return;
  }
  coordinator_->fetch(u);
  reducer_->begin_unit(u);
}

void Stage3Engine::on_grad_ready(size_t u) {
  if (!in_backward_) return;
  if (reducer_->grad_ready(u)) reduce_unit(u);
}

void Stage3Engine::reduce_unit(size_t u) {
  torch::NoGradGuard no_grad;
  if (!units_[u]->grads_begun()) before_unit_backward(u);  // no gradient arrived: reduce zeros
  reducer_->start(u);
  coordinator_->release_unless_reused(u, /*backward_follows=*/false);
  reducer_->finish_unless_overlapping();
}

void Stage3Engine::after_backward(bool boundary) {
  // Units whose gradients did not all arrive (unused parameters, or a failed backward), in unit
  // order on every rank.
  for (size_t u = 0; u < units_.size(); ++u) {
    if (!reducer_->reduced(u)) reduce_unit(u);
  }
  reducer_->finish_all();
  // MiCS: the window's gradient shard averaged over the replicas of this shard.
  if (boundary && mics_) mics_->average_gradients(reducer_->grad_shard());
  in_backward_ = false;
  // A pass is a forward and its backward; when forwards of later micro-batches ran before this
  // backward (a pipeline's 1F1B schedule, the same way in every window) it lasts until their
  // backwards too, and never beyond the window. At its end nothing stays gathered into the step
  // but persistent units (a prefetch the pass never used, after a departure from the trace).
  if (forwards_pending_ > 0 && !boundary) return;
  forwards_pending_ = 0;
  coordinator_->reshard_all();
  coordinator_->end_pass();
}

at::Tensor Stage3Engine::reduced_grads() { return reducer_->grad_shard(); }

double Stage3Engine::global_grad_norm(const at::Tensor& reduced) {
  return sharded_l2_norm(shard_group_, reduced);
}

std::vector<EngineBase::GradPiece> Stage3Engine::reduced_pieces() const {
  // Every unit's slice of this rank, piece by piece (as state_view maps them).
  std::vector<GradPiece> pieces;
  for (size_t u = 0; u < units_.size(); ++u) {
    for (const OwnedPiece& p : units_[u]->slice_pieces(shard_group_.rank())) {
      pieces.push_back({&units_[u]->params()[p.slot].name,
                        slices_->slice_offset(u) + p.shard_offset, p.numel, p.param_begin});
    }
  }
  return pieces;
}

void Stage3Engine::update_parameters(const UpdateRates& rates, float grad_factor) {
  if (rates.beta1) adam_->set_beta1(*rates.beta1);
  if (rates.beta2) adam_->set_beta2(*rates.beta2);
  staged_master_ = staged_exp_avg_ = staged_exp_avg_sq_ = at::Tensor();
  // Read-ahead of the old parameters is stale after this update.
  slices_->drop_unused();
  const at::Tensor& grads = reducer_->grad_shard();
  const at::Tensor& shard = slices_->shard();
  if (swapped_) {
    swapped_->step(
        group_, grads, master_swapped_ ? at::Tensor() : master_, rates.lr, grad_factor,
        [this](int64_t lo, int64_t n, const float* master) { slices_->publish(lo, n, master); });
    if (!master_swapped_ && master_.data_ptr() != shard.data_ptr())
      slices_->publish(0, master_.numel(), master_.data_ptr<float>());
  } else if (shard.scalar_type() == at::kBFloat16 && !slices_->swaps()) {
    adam_->step(master_, grads, rates.lr, grad_factor, shard);
  } else {
    adam_->step(master_, grads, rates.lr, grad_factor);
    // The same rounding as the kernel's bf16 copy (torch's conversion).
    if (master_.data_ptr() != shard.data_ptr())
      slices_->publish(0, master_.numel(), master_.data_ptr<float>());
  }
  // The other units gather the new slices when they next run.
  coordinator_->after_slices_changed();
}

void Stage3Engine::zero_grads() { reducer_->zero(); }

std::vector<EngineBase::StatePiece> Stage3Engine::state_view(StateUse use) {
  // MiCS: every replica holds the same state; replica group 0 writes it.
  if (use == StateUse::kSave && mics_ && !mics_->writes_checkpoint()) return {};
  // nvme: the whole shard's state in RAM for the checkpoint's duration (released at the next step).
  if (swapped_) {
    const int64_t numel = slices_->shard_numel();
    const auto fp32 = at::TensorOptions(at::kFloat);
    staged_exp_avg_ = at::zeros({numel}, fp32);
    staged_exp_avg_sq_ = at::zeros({numel}, fp32);
    staged_master_ = master_swapped_ ? at::zeros({numel}, fp32) : master_;
    if (use == StateUse::kSave)
      swapped_->read_all(staged_master_, staged_exp_avg_, staged_exp_avg_sq_);
  }
  const at::Tensor& master = swapped_ ? staged_master_ : master_;
  const at::Tensor& exp_avg = swapped_ ? staged_exp_avg_ : adam_->exp_avg();
  const at::Tensor& exp_avg_sq = swapped_ ? staged_exp_avg_sq_ : adam_->exp_avg_sq();
  // The pieces of every unit's slice, as element ranges of the parameters.
  std::vector<StatePiece> out;
  for (size_t u = 0; u < units_.size(); ++u) {
    for (const OwnedPiece& p : units_[u]->slice_pieces(shard_group_.rank())) {
      const FlatParamEntry& e = units_[u]->params()[p.slot];
      const int64_t offset = slices_->slice_offset(u) + p.shard_offset;
      out.push_back({e.name, p.param_begin, p.param_begin + p.numel,
                     master.narrow(0, offset, p.numel), exp_avg.narrow(0, offset, p.numel),
                     exp_avg_sq.narrow(0, offset, p.numel)});
    }
  }
  return out;
}

void Stage3Engine::publish_loaded_state() {
  slices_->drop_unused();
  const at::Tensor master = swapped_ ? staged_master_ : master_;
  if (swapped_) swapped_->write_all(staged_master_, staged_exp_avg_, staged_exp_avg_sq_);
  if (master.data_ptr() != slices_->shard().data_ptr())
    slices_->publish(0, master.numel(), master.data_ptr<float>());
  staged_master_ = staged_exp_avg_ = staged_exp_avg_sq_ = at::Tensor();
  coordinator_->after_slices_changed();
}

}  // namespace deepshard::zero
