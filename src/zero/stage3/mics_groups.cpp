// Implementation of MicsGroups (see mics_groups.h).
#include "zero/stage3/mics_groups.h"

#include <torch/torch.h>

#include <algorithm>
#include <string>
#include <vector>

#include "comm/derived_groups.h"
#include "comm/transport_options.h"
#include "deepshard/util/error.h"
#include "util/log.h"

namespace deepshard::zero {

std::unique_ptr<MicsGroups> MicsGroups::create(comm::Group& job, const config::ZeroConfig& zero) {
  if (zero.mics_shard_size <= 0) return nullptr;
  const int world = job.size();
  const int shard_size = static_cast<int>(zero.mics_shard_size);
  DS_CHECK(zero.mics_shard_size <= world && world % shard_size == 0, ConfigError,
           "zero_optimization.mics_shard_size ", zero.mics_shard_size,
           " does not divide the job's ", world,
           " data-parallel ranks (MiCS cuts them into shard groups of that many consecutive "
           "ranks)");
  const int per_node = std::max(1, job.info().local_world_size);
  const bool spans_nodes = shard_size > per_node;
  if (zero.mics_hierarchical_params_gather) {
    DS_CHECK(spans_nodes && shard_size % per_node == 0, ConfigError,
             "zero_optimization.mics_hierarchical_params_gather needs shard groups of whole "
             "nodes spanning more than one, but zero_optimization.mics_shard_size ",
             shard_size, " with ", per_node, " ranks per node gives shard groups ",
             spans_nodes ? "that are not whole nodes"
                         : "inside one node (nothing to gather in two hops)");
  }
  const int rank = job.rank();
  const int group_index = rank / shard_size;  // which shard group: its index in the replica group
  const int shard_index = rank % shard_size;  // which shard: the replica group's index
  std::vector<int> shard_members, replica_members;
  for (int i = 0; i < shard_size; ++i) shard_members.push_back(group_index * shard_size + i);
  for (int g = 0; g < world / shard_size; ++g)
    replica_members.push_back(g * shard_size + shard_index);

  comm::GroupOptions job_options = comm::options_of(job);
  comm::GroupOptions shard_options = job_options;
  // A shard group spanning nodes: hierarchical (auto) with mics_hierarchical_params_gather, flat
  // Gloo without.
  if (spans_nodes)
    shard_options.transport = zero.mics_hierarchical_params_gather ? comm::TransportKind::kAuto
                                                                   : comm::TransportKind::kGloo;
  std::unique_ptr<MicsGroups> out(new MicsGroups());
  out->shard_ = comm::create_subgroup(job, shard_members,
                                      "mics/shard/" + std::to_string(group_index), shard_options);
  out->replica_ = comm::create_subgroup(job, replica_members,
                                        "mics/replica/" + std::to_string(shard_index), job_options);
  // Their traffic is the job's: recorded in the job group's log (the comms logger and
  // metrics.jsonl read it).
  comm::record_into(*out->shard_, job);
  comm::record_into(*out->replica_, job);
  if (rank == 0) {
    log::info("MiCS: ", world / shard_size, " shard groups of ", shard_size, " consecutive ranks (",
              comm::transport_name(*out->shard_), "), ", shard_size, " replica groups of ",
              world / shard_size, " ranks (", comm::transport_name(*out->replica_), ")");
  }
  return out;
}

void MicsGroups::broadcast_parameters(torch::nn::Module& model) const {
  if (replica_->size() <= 1) return;
  torch::NoGradGuard no_grad;
  for (const at::Tensor& p : model.parameters(/*recurse=*/true)) {
    if (p.requires_grad()) replica_->broadcast(p, 0);
  }
}

void MicsGroups::average_gradients(const at::Tensor& grad_shard) const {
  if (replica_->size() <= 1) return;
  replica_->all_reduce(grad_shard, comm::ReduceOp::kAvg);
}

}  // namespace deepshard::zero
