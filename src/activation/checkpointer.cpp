// Checkpointer (see checkpoint.h): its options, the pass scope that makes it the thread's active
// checkpointer, and the profile's times.
#include "activation/checkpoint.h"
#include "activation/checkpointer_state.h"
#include "deepshard/comm/group.h"
#include "deepshard/util/error.h"

namespace deepshard::activation {

extern thread_local Checkpointer* t_active;  // recompute.cpp

Checkpointer::Checkpointer(const config::ActivationCheckpointingConfig& options,
                           comm::Group* model_parallel)
    : options_(options), model_parallel_(model_parallel) {
  // DeepSpeed's assertions in deepspeed.checkpointing.configure (the config layer checks them
  // too; a checkpointer built by hand gets them here).
  DS_CHECK(!options.contiguous_memory_optimization || options.partition_activations, ConfigError,
           "activation_checkpointing.contiguous_memory_optimization: requires "
           "partition_activations");
  DS_CHECK(!options.contiguous_memory_optimization || options.number_checkpoints, ConfigError,
           "activation_checkpointing.contiguous_memory_optimization: requires number_checkpoints");
  DS_CHECK(!options.number_checkpoints || *options.number_checkpoints >= 1, ConfigError,
           "activation_checkpointing.number_checkpoints: must be at least 1");
  state_ = std::make_shared<State>(options_, model_parallel_);
}

Checkpointer::~Checkpointer() {
  if (t_active == this) t_active = nullptr;
}

int Checkpointer::model_parallel_size() const {
  return model_parallel_ != nullptr ? model_parallel_->size() : 1;
}

Checkpointer::Pass::Pass(Checkpointer& owner) : owner_(&owner), previous_(t_active) {
  t_active = &owner;
  owner.begin_pass();
}

Checkpointer::Pass::~Pass() {
  owner_->end_pass();
  t_active = previous_;
}

void Checkpointer::begin_pass() {
  state_->next_region = 0;
  state_->regions = 0;
  state_->kept_bytes = 0;
  state_->contiguous.reset();
}

void Checkpointer::end_pass() {
  last_pass_regions_ = state_->regions;
  last_pass_kept_bytes_ = state_->kept_bytes;
}

std::vector<RegionTimes> Checkpointer::take_times() {
  std::lock_guard<std::mutex> lock(state_->mu);
  std::vector<RegionTimes> out;
  out.swap(state_->times);
  return out;
}

}  // namespace deepshard::activation
