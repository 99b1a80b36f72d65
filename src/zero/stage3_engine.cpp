// Implementation of the stage-3 engine (see stage3_engine.h).
#include "zero/stage3_engine.h"

#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "deepshard/util/error.h"
#include "deepshard/util/log.h"
#include "deepshard/zero/partitioned_build.h"
#include "zero/grad_norm.h"
#include "zero/offload_notes.h"
#include "zero/pre_backward.h"
#include "zero/storage_resize.h"

namespace deepshard::zero {

Stage3Engine::Stage3Engine(std::shared_ptr<torch::nn::Module> model, const config::DsConfig& config,
                           comm::Group& group, PartitionedBuild* build)
    : EngineBase(std::move(model), config, group),
      declared_(declared_plan(*model_)),
      plan_(resolve_units(*model_, declared_)),
      trace_(unit_names()),
      fetch_check_(unit_names()) {
  // The full parameter storage the units replace must leave the process (storage_resize.h).
  return_large_frees_to_os();
  create_units(build);
  allocate_shards();
  create_optimizer();
  add_unit_hooks();
  install_unit_wrapper();
  // The model is partitioned: from here on, freed activations are reused (storage_resize.h).
  keep_freed_memory_for_reuse();
}

void Stage3Engine::create_units(PartitionedBuild* build) {
  int64_t persistent_numel = 0;  // of the units made persistent by the thresholds
  int64_t shard_numel = 0;
  for (size_t i = 0; i < plan_.units.size(); ++i) {
    auto& spec = plan_.units[i];
    std::unique_ptr<Stage3Unit> unit = build != nullptr ? build->take_unit(i) : nullptr;
    prebuilt_.push_back(unit != nullptr);
    if (unit != nullptr) {
      unit->adopt(spec.name, spec.params);
    } else {
      unit = std::make_unique<Stage3Unit>(spec.name, std::move(spec.params), group_.size());
    }
    units_.push_back(std::move(unit));
    const Stage3Unit& u = *units_.back();
    // The root stays gathered (nothing wraps it); small units too, in unit order while their total
    // stays within stage3_model_persistence_threshold (DeepSpeed's rule; the root is not counted).
    const bool small = units_.size() > 1 && u.numel() <= config_.zero.param_persistence_threshold &&
                       persistent_numel + u.numel() <= config_.zero.model_persistence_threshold;
    if (small) persistent_numel += u.numel();
    persistent_.push_back(units_.size() == 1 || small);
    slice_offsets_.push_back(shard_numel);
    shard_numel += u.slice_numel();
    num_parameters_ += u.numel();
  }
}

void Stage3Engine::allocate_shards() {
  const int64_t shard_numel = slice_offsets_.back() + units_.back()->slice_numel();
  const auto options = units_[0]->options().requires_grad(false);
  low_precision_params_ = options.dtype() != at::kFloat;
  const config::OffloadConfig& offload_param = config_.zero.offload_param;
  log_offload_notes(config_, options.device(), comm::job_rank(group_.info()));
  // offload_param nvme: the slices of units that are not persistent go to NVMe, beyond the first
  // max_in_cpu elements of them (kept in host memory, DeepSpeed's max_in_cpu).
  const bool param_nvme = offload_param.device == config::OffloadDevice::kNvme;
  swapped_param_.assign(units_.size(), false);
  holding_buffer_.assign(units_.size(), false);
  std::vector<int64_t> resident_at(units_.size(), -1);
  int64_t resident_numel = 0, in_cpu = 0;
  std::vector<int64_t> swap_bytes(units_.size(), 0);
  int64_t largest_swapped = 0;
  for (size_t u = 0; u < units_.size(); ++u) {
    const int64_t slice = units_[u]->slice_numel();
    if (param_nvme && !persistent_[u]) {
      if (in_cpu + slice <= offload_param.max_in_cpu) {
        in_cpu += slice;
      } else {
        swapped_param_[u] = true;
        swap_bytes[u] = slice * units_[u]->element_size();
        largest_swapped = std::max(largest_swapped, swap_bytes[u]);
        continue;
      }
    }
    resident_at[u] = resident_numel;
    resident_numel += slice;
  }
  if (largest_swapped > 0) {
    offload::PartitionSwapOptions po;
    // Swap folders are named by the job's rank: a data-parallel group is one of several under
    // tensor or pipeline parallelism.
    const int job_rank = comm::job_rank(group_.info());
    const offload::SwapOptions so = swap_options(config_, offload_param, "params", job_rank);
    po.nvme_path = so.nvme_path;
    po.run = so.run;
    po.rank = job_rank;
    po.aio = so.aio;
    po.pin_memory = offload_param.pin_memory;
    po.buffer_count = offload_param.buffer_count;
    // A buffer larger than the largest swapped slice would never be filled; a smaller one is
    // refused (PartitionSwapper names offload_param.buffer_size).
    po.buffer_bytes =
        std::min(offload_param.buffer_size * units_[0]->element_size(), largest_swapped);
    param_swapper_ = std::make_unique<offload::PartitionSwapper>(swap_bytes, po);
    ledger_.allocate(MemoryCategory::kSwapBuffers, param_swapper_->held_bytes(),
                     MemoryPlace::kHost);
    if (job_rank == 0) {
      log::info(
          "offload_param nvme: ", std::count(swapped_param_.begin(), swapped_param_.end(), true),
          " of ", units_.size(), " units' slices on NVMe in ", param_swapper_->folder(), " (",
          offload_param.buffer_count, " buffers of ", po.buffer_bytes,
          " bytes; read ahead in the trace's order)");
    }
  }
  shard_ = torch::zeros({resident_numel}, options);
  ledger_.allocate(MemoryCategory::kParameters, resident_numel * shard_.element_size(),
                   offload_param.enabled() ? MemoryPlace::kHost : MemoryPlace::kCompute);
  if (shard_numel > resident_numel)
    ledger_.allocate(MemoryCategory::kParameters,
                     (shard_numel - resident_numel) * shard_.element_size(), MemoryPlace::kNvme);
  in_flight_.resize(units_.size());
  param_slice_.resize(units_.size());
  for (size_t u = 0; u < units_.size(); ++u) {
    // A swapped unit's slice passes through a temporary on its way to its swap file.
    const at::Tensor slice = swapped_param_[u]
                                 ? torch::zeros({units_[u]->slice_numel()}, options)
                                 : shard_.narrow(0, resident_at[u], units_[u]->slice_numel());
    if (!swapped_param_[u]) param_slice_[u] = slice;
    if (prebuilt_[u]) {  // released, its slice in a buffer of its own
      DS_CHECK(units_[u]->options().dtype() == options.dtype(), Error, "ZeRO-3: unit ",
               units_[u]->name(), " was built under zero.Init in ", units_[u]->options().dtype(),
               ", the root is ", options.dtype());
      units_[u]->move_shard(slice);
    } else {
      // A unit starts gathered (it holds the model's parameters).
      units_[u]->partition(group_, slice);
      ledger_.allocate(MemoryCategory::kGatheredParams,
                       units_[u]->padded_numel() * units_[u]->element_size());
    }
    if (swapped_param_[u]) {
      param_swapper_->write(u, slice.data_ptr());
      units_[u]->set_shard(at::Tensor());
    }
    if (prebuilt_[u]) {
      if (persistent_[u]) gather(u);
      continue;
    }
    if (persistent_[u]) continue;
    live_elements_ += units_[u]->padded_numel();
    release(u);
  }
}

void Stage3Engine::create_optimizer() {
  const int rank = group_.rank();
  const int64_t shard_numel = slice_offsets_.back() + units_.back()->slice_numel();
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
  // A separate fp32 master: bf16/fp16 parameters, or parameters on NVMe (not all in shard_).
  master_swapped_ = opt_nvme && (low_precision_params_ || param_swapper_);
  master_ = shard_;
  if (low_precision_params_ || param_swapper_) {
    if (!opt_nvme) {
      master_ = torch::zeros({shard_numel}, options.dtype(at::kFloat));
      read_params(0, shard_numel, master_.data_ptr<float>());
    }
    place_state(MemoryCategory::kMasterWeights, 4);
  }
  grad_shard_ = torch::zeros({shard_numel}, options.dtype(at::kFloat));
  ledger_.allocate(MemoryCategory::kGradients, shard_numel * 4);
  if (config_.gradient_accumulation_steps > 1) {
    int64_t largest = 0;
    for (const auto& u : units_) largest = std::max(largest, u->slice_numel());
    for (int b = 0; b < (config_.zero.overlap_comm ? 2 : 1); ++b) {
      receive_.push_back(torch::zeros({largest}, grad_shard_.options()));
      ledger_.allocate(MemoryCategory::kCommBuffers, largest * 4);
    }
  }

  std::vector<optim::ParamRange> ranges;
  for (size_t u = 0; u < units_.size(); ++u) {
    for (auto r : units_[u]->slice_ranges(rank, config_.optimizer.weight_decay)) {
      r.offset += slice_offsets_[u];
      ranges.push_back(r);
    }
  }
  adam_ = std::make_unique<optim::FlatAdam>(config_.optimizer, shard_numel, std::move(ranges),
                                            /*host_state=*/!opt_nvme);
  reduction_ = make_grad_reduction(group_, config_);
  place_state(MemoryCategory::kOptimizerState, 8);
  if (opt_nvme) {
    swapped_ = std::make_unique<SwappedAdam>(
        config_, comm::job_rank(group_.info()), *adam_, master_swapped_, groups,
        [this](int64_t lo, int64_t n, float* out) { read_params(lo, n, out); });
    ledger_.allocate(MemoryCategory::kSwapBuffers, swapped_->held_bytes(), MemoryPlace::kHost);
  }
}

void Stage3Engine::add_unit_hooks() {
  pending_.assign(units_.size(), 0);
  reduced_.assign(units_.size(), false);
  for (size_t u = 0; u < units_.size(); ++u) {
    pre_backward_.push_back([this, u] { before_unit_backward(u); });
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
  // The plan's unit i is the engine's unit i + 1 (0 is the root).
  wrapper_id_ = declared_.calls().add(
      [this](size_t unit, const sharding::UnitBody& body) { return run_unit(unit + 1, body); },
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
  for (size_t u = 0; u < units_.size(); ++u) {
    if (units_[u]->gathered()) continue;
    // A swapped slice holds a buffer until its gather ends: one at a time.
    if (swapped_param_[u]) {
      gather(u);
    } else {
      start_gather(u);
    }
  }
  for (size_t u = 0; u < units_.size(); ++u) finish_gather(u);
  holding_all_ = true;  // a forward inside fn neither gathers nor releases
  try {
    fn();
  } catch (...) {
    holding_all_ = false;
    throw;
  }
  holding_all_ = false;
  for (size_t u = 0; u < units_.size(); ++u) {
    if (!persistent_[u]) release(u);
  }
}

int64_t Stage3Engine::persistent_parameters() const {
  int64_t n = 0;
  for (size_t u = 0; u < units_.size(); ++u) n += persistent_[u] ? units_[u]->numel() : 0;
  return n;
}

int64_t Stage3Engine::largest_unit_parameters() const {
  int64_t n = 0;
  for (const auto& u : units_) n = std::max(n, u->numel());
  return n;
}

at::Tensor Stage3Engine::run_unit(size_t u, const std::function<at::Tensor()>& body) {
  DS_CHECK(u > 0 && u < units_.size(), Error, "ZeRO-3: the model ran unit ", u - 1,
           " through its UnitCalls, but its sharding plan declares ", units_.size() - 1, " units");
  if (holding_all_) return body();
  // Only training forwards are part of the trace (an evaluation has no backward to pair with).
  if (!torch::GradMode::is_enabled()) {
    gather(u);
    at::Tensor out = body();
    if (!persistent_[u]) release(u);
    return out;
  }
  fetch(u);
  at::Tensor out = body();
  release_unless_reused(u);
  return run_before_backward(out, &pre_backward_[u]);
}

bool Stage3Engine::reused_soon(size_t u) const {
  // DeepSpeed's walk: the units after the current position, until their elements reach the
  // distance; u among them is used again soon.
  int64_t walked = 0;
  for (size_t v : trace_.upcoming()) {
    if (walked >= config_.zero.max_reuse_distance) break;
    if (v == u) return true;
    walked += units_[v]->numel();
  }
  return false;
}

void Stage3Engine::release_unless_reused(size_t u) {
  if (persistent_[u]) return;
  // A unit kept for its reuse counts toward stage3_max_live_parameters like a prefetched one, and
  // is kept only while the gathered elements stay within it.
  if (reused_soon(u) && live_elements_ <= config_.zero.max_live_parameters) return;
  release(u);
}

void Stage3Engine::fetch(size_t u) {
  const bool following = trace_.on_fetch(u);
  gather(u);
  if (following) prefetch(u);
}

void Stage3Engine::prefetch(size_t current) {
  int64_t bucket = config_.zero.prefetch_bucket_size;
  int64_t beyond_current =
      live_elements_ - (persistent_[current] ? 0 : units_[current]->padded_numel());
  for (size_t v : trace_.upcoming()) {
    if (persistent_[v] || units_[v]->gathered()) continue;
    const int64_t n = units_[v]->padded_numel();
    if (n > bucket || beyond_current + n > config_.zero.max_live_parameters) break;
    // A swapped slice needs a free swap buffer (offload_param.buffer_count bounds the prefetch).
    if (swapped_param_[v] && !param_swapper_->prefetch(v)) break;
    start_gather(v);
    bucket -= n;
    beyond_current += n;
  }
  if (!param_swapper_) return;
  // offload_param nvme: read the next swapped slices of the trace ahead of their gathers, while
  // swap buffers are free, up to twice the prefetch bucket beyond what is gathered.
  int64_t ahead = 0;
  for (size_t v : trace_.upcoming()) {
    if (!swapped_param_[v] || units_[v]->gathered()) continue;
    if (ahead > 2 * config_.zero.prefetch_bucket_size || !param_swapper_->prefetch(v)) break;
    ahead += units_[v]->padded_numel();
  }
}

void Stage3Engine::for_units_in(
    int64_t lo, int64_t n, const std::function<void(size_t, int64_t, int64_t, int64_t)>& fn) const {
  for (size_t u = 0; u < units_.size(); ++u) {
    const int64_t begin = slice_offsets_[u], end = begin + units_[u]->slice_numel();
    const int64_t a = std::max(lo, begin), b = std::min(lo + n, end);
    if (a < b) fn(u, a - begin, a, b - a);
  }
}

void Stage3Engine::publish_params(int64_t lo, int64_t n, const float* master) {
  torch::NoGradGuard no_grad;
  for_units_in(lo, n, [&](size_t u, int64_t in_slice, int64_t at, int64_t len) {
    const at::Tensor values =
        at::from_blob(const_cast<float*>(master) + (at - lo), {len}, at::TensorOptions(at::kFloat));
    if (!swapped_param_[u]) {
      param_slice_[u].narrow(0, in_slice, len).copy_(values);
      return;
    }
    // Windows come in shard order: a swapped unit's slice is assembled, then written whole.
    if (in_slice == 0) {
      publish_unit_ = u;
      publish_filled_ = 0;
      if (!publish_stage_.defined() || publish_stage_.numel() < units_[u]->slice_numel())
        publish_stage_ = torch::empty({units_[u]->slice_numel()}, shard_.options());
    }
    DS_ASSERT(publish_unit_ == u && publish_filled_ == in_slice, "publish out of order");
    publish_stage_.narrow(0, in_slice, len).copy_(values);
    publish_filled_ += len;
    if (publish_filled_ == units_[u]->slice_numel())
      param_swapper_->write(u, publish_stage_.data_ptr());
  });
}

void Stage3Engine::read_params(int64_t lo, int64_t n, float* out) {
  torch::NoGradGuard no_grad;
  for_units_in(lo, n, [&](size_t u, int64_t in_slice, int64_t at, int64_t len) {
    at::Tensor dst = at::from_blob(out + (at - lo), {len}, at::TensorOptions(at::kFloat));
    if (!swapped_param_[u]) {
      dst.copy_(param_slice_[u].narrow(0, in_slice, len));
      return;
    }
    const void* slice = param_swapper_->acquire(u);
    dst.copy_(at::from_blob(const_cast<void*>(slice), {units_[u]->slice_numel()}, shard_.options())
                  .narrow(0, in_slice, len));
    param_swapper_->release(u);
  });
}

void Stage3Engine::start_gather(size_t u) {
  DS_ASSERT(!units_[u]->gathered());
  if (swapped_param_[u]) {  // its slice from NVMe (read ahead, or now) into a swap buffer
    // No free buffer: unused read-ahead gives way, then gathers in flight are completed (their
    // buffers go back; those units stay gathered).
    if (!param_swapper_->prefetch(u)) param_swapper_->drop_unused();
    for (size_t v = 0; v < units_.size() && !param_swapper_->prefetch(u); ++v) {
      if (holding_buffer_[v]) finish_gather(v);
    }
    const void* slice = param_swapper_->acquire(u);
    units_[u]->set_shard(
        at::from_blob(const_cast<void*>(slice), {units_[u]->slice_numel()}, shard_.options()));
    holding_buffer_[u] = true;
  }
  fetch_check_.start(group_, u);
  in_flight_[u] = units_[u]->gather_async(group_);
  ledger_.allocate(MemoryCategory::kGatheredParams,
                   units_[u]->padded_numel() * units_[u]->element_size());
  if (!persistent_[u]) live_elements_ += units_[u]->padded_numel();
}

void Stage3Engine::gather(size_t u) {
  if (!units_[u]->gathered()) start_gather(u);
  finish_gather(u);
}

void Stage3Engine::finish_gather(size_t u) {
  in_flight_[u].wait();
  fetch_check_.finish(u);
  if (!holding_buffer_[u]) return;
  units_[u]->set_shard(at::Tensor());
  param_swapper_->release(u);
  holding_buffer_[u] = false;
}

void Stage3Engine::regather(size_t u) {
  fetch_check_.start(group_, u);
  units_[u]->gather(group_);
  fetch_check_.finish(u);
}

void Stage3Engine::release(size_t u) {
  if (!units_[u]->gathered()) return;
  finish_gather(u);
  units_[u]->release();
  ledger_.release(MemoryCategory::kGatheredParams,
                  units_[u]->padded_numel() * units_[u]->element_size());
  if (!persistent_[u]) live_elements_ -= units_[u]->padded_numel();
}

void Stage3Engine::before_backward(bool) {
  first_micro_step_ = micro_steps() % config_.gradient_accumulation_steps == 0;
  pending_.clear();
  for (const auto& u : units_) pending_.push_back(u->params().size());
  reduced_.assign(units_.size(), false);
  in_backward_ = true;
  // The root's outputs are not wrapped: its gradients start with the backward.
  before_unit_backward(0);
}

void Stage3Engine::before_unit_backward(size_t u) {
  if (!in_backward_ || units_[u]->grads_begun() || reduced_[u]) {
    gather(u);  // a backward the engine does not drive: the unit then stays gathered
    return;
  }
  fetch(u);
  units_[u]->begin_grads();
  ledger_.allocate(MemoryCategory::kGradients,
                   units_[u]->padded_numel() * units_[u]->element_size());
}

void Stage3Engine::on_grad_ready(size_t u) {
  if (!in_backward_) return;
  DS_ASSERT(pending_[u] > 0, "ZeRO-3 unit ", units_[u]->name(), ": more gradients than parameters");
  if (--pending_[u] == 0) reduce_unit(u);
}

void Stage3Engine::reduce_unit(size_t u) {
  Stage3Unit& unit = *units_[u];
  torch::NoGradGuard no_grad;
  if (!unit.grads_begun()) before_unit_backward(u);  // no gradient arrived: reduce zeros
  // Two reductions in flight at most with overlap_comm (each with its own receive buffer).
  const size_t max_in_flight = config_.zero.overlap_comm ? 2 : 1;
  while (reducing_.size() >= max_in_flight) finish_reduction();
  Reduction r;
  r.grads = unit.take_grads();
  r.ledger_bytes = unit.padded_numel() * unit.element_size();
  // Reduced in the wire dtype (communication_data_type) when it is the gradients' own, else in
  // fp32 (GradReduction casts for the wire).
  if (r.grads.scalar_type() != at::kFloat &&
      reduction_->options().wire_dtype != r.grads.scalar_type()) {
    r.grads = r.grads.to(at::kFloat);
  }
  // The window's first micro-step writes the shard; later ones add into it.
  r.slice = grad_shard_.narrow(0, slice_offsets_[u], unit.slice_numel());
  r.out = first_micro_step_
              ? r.slice
              : receive_[reductions_started_ % receive_.size()].narrow(0, 0, unit.slice_numel());
  ++reductions_started_;
  r.work = reduction_->reduce_scatter_mean_async(r.out, r.grads);
  reducing_.push_back(std::move(r));
  reduced_[u] = true;
  release_unless_reused(u);
  if (!config_.zero.overlap_comm) finish_reduction();
}

void Stage3Engine::finish_reduction() {
  Reduction& r = reducing_.front();
  r.work.wait();
  reduction_->complete_next();  // the wire dtype's cast back
  if (!r.out.is_same(r.slice)) r.slice.add_(r.out);
  ledger_.release(MemoryCategory::kGradients, r.ledger_bytes);
  reducing_.pop_front();  // frees the unit's full gradients
}

void Stage3Engine::after_backward(bool) {
  // Units whose gradients did not all arrive (unused parameters, or a failed backward), in unit
  // order on every rank.
  for (size_t u = 0; u < units_.size(); ++u) {
    if (!reduced_[u]) reduce_unit(u);
  }
  while (!reducing_.empty()) finish_reduction();
  in_backward_ = false;
  // Nothing stays gathered into the step but persistent units (a prefetch the pass never used,
  // after a departure from the trace).
  for (size_t u = 0; u < units_.size(); ++u) {
    if (!persistent_[u]) release(u);
  }
  trace_.end_pass(group_);
}

at::Tensor Stage3Engine::reduced_grads() { return grad_shard_; }

double Stage3Engine::global_grad_norm(const at::Tensor& reduced) {
  return sharded_l2_norm(group_, reduced);
}

std::vector<EngineBase::GradPiece> Stage3Engine::reduced_pieces() const {
  // Every unit's slice of this rank, piece by piece (as state_view maps them).
  std::vector<GradPiece> pieces;
  for (size_t u = 0; u < units_.size(); ++u) {
    for (const OwnedPiece& p : units_[u]->slice_pieces(group_.rank())) {
      pieces.push_back(
          {&units_[u]->params()[p.slot].name, slice_offsets_[u] + p.shard_offset, p.numel});
    }
  }
  return pieces;
}

void Stage3Engine::update_parameters(const UpdateRates& rates, float grad_factor) {
  if (rates.beta1) adam_->set_beta1(*rates.beta1);
  if (rates.beta2) adam_->set_beta2(*rates.beta2);
  staged_master_ = staged_exp_avg_ = staged_exp_avg_sq_ = at::Tensor();
  // Read-ahead of the old parameters is stale after this update.
  if (param_swapper_) param_swapper_->drop_unused();
  if (swapped_) {
    swapped_->step(
        group_, grad_shard_, master_swapped_ ? at::Tensor() : master_, rates.lr, grad_factor,
        [this](int64_t lo, int64_t n, const float* master) { publish_params(lo, n, master); });
    if (!master_swapped_ && master_.data_ptr() != shard_.data_ptr())
      publish_params(0, master_.numel(), master_.data_ptr<float>());
  } else if (shard_.scalar_type() == at::kBFloat16 && !param_swapper_) {
    adam_->step(master_, grad_shard_, rates.lr, grad_factor, shard_);
  } else {
    adam_->step(master_, grad_shard_, rates.lr, grad_factor);
    // The same rounding as the kernel's bf16 copy (torch's conversion).
    if (master_.data_ptr() != shard_.data_ptr())
      publish_params(0, master_.numel(), master_.data_ptr<float>());
  }
  // The other units gather the new slices when they next run.
  for (size_t u = 0; u < units_.size(); ++u) {
    if (units_[u]->gathered()) regather(u);  // persistent units
  }
}

void Stage3Engine::zero_grads() { grad_shard_.zero_(); }

std::vector<EngineBase::StatePiece> Stage3Engine::state_view(StateUse use) {
  // nvme: the whole shard's state in RAM for the checkpoint's duration (released at the next step).
  if (swapped_) {
    const int64_t numel = grad_shard_.numel();
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
    for (const OwnedPiece& p : units_[u]->slice_pieces(group_.rank())) {
      const FlatParamEntry& e = units_[u]->params()[p.slot];
      const int64_t offset = slice_offsets_[u] + p.shard_offset;
      out.push_back({e.name, p.param_begin, p.param_begin + p.numel,
                     master.narrow(0, offset, p.numel), exp_avg.narrow(0, offset, p.numel),
                     exp_avg_sq.narrow(0, offset, p.numel)});
    }
  }
  return out;
}

void Stage3Engine::publish_loaded_state() {
  if (param_swapper_) param_swapper_->drop_unused();
  const at::Tensor master = swapped_ ? staged_master_ : master_;
  if (swapped_) swapped_->write_all(staged_master_, staged_exp_avg_, staged_exp_avg_sq_);
  if (master.data_ptr() != shard_.data_ptr())
    publish_params(0, master.numel(), master.data_ptr<float>());
  staged_master_ = staged_exp_avg_ = staged_exp_avg_sq_ = at::Tensor();
  for (size_t u = 0; u < units_.size(); ++u) {
    if (units_[u]->gathered()) regather(u);  // persistent units
  }
}

}  // namespace deepshard::zero
