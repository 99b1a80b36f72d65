// MicsGroups: MiCS's process groups at ZeRO stage 3 (zero_optimization.mics_shard_size; DeepSpeed's
// MiCS_CommGroups). The job's N ranks are cut into N/S shard groups of S consecutive ranks (one
// node's ranks when S is the ranks per node) and S replica groups (the ranks holding the same
// index in every shard group, N/S each). The stage-3 engine partitions its units, gradients and
// optimizer state over the shard group exactly as plain stage 3 partitions them over the whole
// job (each rank keeps 1/S of the model states; every shard group holds a full replica), so the
// parameter all-gathers and the gradient reduce-scatters stay inside the shard group; at the
// accumulation boundary each rank's fp32 gradient shard is averaged over its replica group, the
// only traffic between shard groups (besides the start-up broadcast of the parameters).
// mics_hierarchical_params_gather (a shard group spanning several nodes, a whole number of nodes
// each): the shard group's collectives run on the hierarchical transport (docs/comm.md), whose
// all-gather is DeepSpeed's 2-hop parameter gather (across nodes among the ranks of one local
// rank, then inside each node); without it a shard group spanning nodes is flat Gloo, as
// DeepSpeed's shard-group all-gather is flat.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>

#include "deepshard/comm/group.h"
#include "deepshard/config/ds_config.h"

namespace torch::nn {
class Module;
}

namespace deepshard::zero {

class MicsGroups {
 public:
  // The groups of `job` (every rank of `job` calls this at the same point), or null when
  // mics_shard_size <= 0 (plain stage 3). Throws ConfigError naming the keys when the shard size
  // does not divide the job, or mics_hierarchical_params_gather is set for shard groups inside one
  // node (or not made of whole nodes).
  static std::unique_ptr<MicsGroups> create(comm::Group& job, const config::ZeroConfig& zero);

  comm::Group& shard() const { return *shard_; }
  comm::Group& replica() const { return *replica_; }

  // The model's trainable parameters made the same on every replica: broadcast over the replica
  // group from its rank 0 (the shard group's partition then makes them the job's rank 0's).
  void broadcast_parameters(torch::nn::Module& model) const;
  // The fp32 gradient shard averaged over the replica group, in place (a collective).
  void average_gradients(const at::Tensor& grad_shard) const;
  // Replica group 0 (the job's first S ranks) writes the checkpoint's pieces; the others' are the
  // same values.
  bool writes_checkpoint() const { return replica_->rank() == 0; }

 private:
  MicsGroups() = default;
  std::unique_ptr<comm::Group> shard_;
  std::unique_ptr<comm::Group> replica_;
};

}  // namespace deepshard::zero
