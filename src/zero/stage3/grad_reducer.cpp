// Implementation of GradReducer (see grad_reducer.h).
#include "zero/stage3/grad_reducer.h"

#include <torch/torch.h>

#include <algorithm>

#include "deepshard/util/error.h"
#include "zero/grad_wire.h"

namespace deepshard::zero {

GradReducer::GradReducer(Stage3Units& units, const SliceStore& slices,
                         const config::DsConfig& config, comm::Group& group, MemoryLedger& ledger)
    : units_(units),
      slices_(slices),
      ledger_(ledger),
      overlap_comm_(config.zero.overlap_comm),
      pending_(units.size(), 0),
      reduced_(units.size(), false) {
  const int64_t shard_numel = slices_.shard_numel();
  grad_shard_ =
      torch::zeros({shard_numel}, units_[0]->options().requires_grad(false).dtype(at::kFloat));
  ledger_.allocate(MemoryCategory::kGradients, shard_numel * 4);
  if (config.gradient_accumulation_steps > 1) {
    int64_t largest = 0;
    for (const auto& u : units_) largest = std::max(largest, u->slice_numel());
    for (int b = 0; b < (overlap_comm_ ? 2 : 1); ++b) {
      receive_.push_back(torch::zeros({largest}, grad_shard_.options()));
      ledger_.allocate(MemoryCategory::kCommBuffers, largest * 4);
    }
  }
  reduction_ = make_grad_reduction(group, config);
  if (config.zero.zero_quantized_gradients && group.size() > 1) {
    quantized_ =
        std::make_unique<QuantizedReduceScatter>(group, std::max(1, group.info().local_world_size));
  }
}

GradReducer::~GradReducer() = default;

void GradReducer::begin_backward(bool first_micro_step) {
  first_micro_step_ = first_micro_step;
  pending_.clear();
  for (const auto& u : units_) pending_.push_back(u->params().size());
  reduced_.assign(units_.size(), false);
}

void GradReducer::begin_unit(size_t u) {
  units_[u]->begin_grads();
  ledger_.allocate(MemoryCategory::kGradients,
                   units_[u]->padded_numel() * units_[u]->element_size());
}

bool GradReducer::grad_ready(size_t u) {
  DS_ASSERT(pending_[u] > 0, "ZeRO-3 unit ", units_[u]->name(), ": more gradients than parameters");
  return --pending_[u] == 0;
}

void GradReducer::start(size_t u) {
  Stage3Unit& unit = *units_[u];
  // Two reductions in flight at most with overlap_comm (each with its own receive buffer).
  const size_t max_in_flight = overlap_comm_ ? 2 : 1;
  while (reducing_.size() >= max_in_flight) finish_oldest();
  Reduction r;
  r.grads = unit.take_grads();
  r.ledger_bytes = unit.padded_numel() * unit.element_size();
  // Reduced in the wire dtype (communication_data_type) when it is the gradients' own, else in
  // fp32 (GradReduction casts for the wire).
  if (!quantized_ && r.grads.scalar_type() != at::kFloat &&
      reduction_->options().wire_dtype != r.grads.scalar_type()) {
    r.grads = r.grads.to(at::kFloat);
  }
  // The window's first micro-step writes the shard; later ones add into it.
  r.slice = grad_shard_.narrow(0, slices_.slice_offset(u), unit.slice_numel());
  r.out = first_micro_step_
              ? r.slice
              : receive_[reductions_started_ % receive_.size()].narrow(0, 0, unit.slice_numel());
  ++reductions_started_;
  if (quantized_) {
    r.quantized = quantized_->start(r.out, r.grads);
  } else {
    r.work = reduction_->reduce_scatter_mean_async(r.out, r.grads);
  }
  reducing_.push_back(std::move(r));
  reduced_[u] = true;
}

void GradReducer::finish_unless_overlapping() {
  if (!overlap_comm_) finish_oldest();
}

void GradReducer::finish_all() {
  while (!reducing_.empty()) finish_oldest();
}

void GradReducer::finish_oldest() {
  Reduction& r = reducing_.front();
  if (r.quantized) {
    r.quantized->wait();
  } else {
    r.work.wait();
    reduction_->complete_next();  // the wire dtype's cast back
  }
  if (!r.out.is_same(r.slice)) r.slice.add_(r.out);
  ledger_.release(MemoryCategory::kGradients, r.ledger_bytes);
  reducing_.pop_front();  // frees the unit's full gradients
}

}  // namespace deepshard::zero
