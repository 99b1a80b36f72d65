// Implementation of SecondaryPartitions, ZeRO++'s hpZ (see secondary_partition.h).
#include "zero/stage3/secondary_partition.h"

#include "comm/derived_groups.h"
#include "deepshard/util/error.h"

namespace deepshard::zero {
namespace {

std::unique_ptr<comm::Group> join_group(comm::Group& world, int64_t size) {
  DS_CHECK(size > 1 && size <= world.size() && world.size() % size == 0, ConfigError,
           "zero_optimization.zero_hpz_partition_size ", size,
           " must divide the number of data-parallel ranks (", world.size(),
           "): hpZ's secondary partition groups are that many consecutive ranks");
  const int first = world.rank() / int(size) * int(size);
  std::vector<int> members;
  for (int r = first; r < first + int(size); ++r) members.push_back(r);
  auto group = comm::create_subgroup(world, members, "hpz/" + std::to_string(first / size),
                                     comm::options_of(world));
  // Its traffic is the engine's: counted with the job's (metrics.jsonl, summary.json, the comms
  // logger).
  comm::record_into(*group, world);
  return group;
}

}  // namespace

SecondaryPartitions::SecondaryPartitions(comm::Group& world, int64_t partition_size, size_t units,
                                         MemoryLedger& ledger)
    : group_(join_group(world, partition_size)), ledger_(ledger), parts_(units) {}

SecondaryPartitions::~SecondaryPartitions() { drop_all(); }

void SecondaryPartitions::keep(size_t u, const Stage3Unit& unit) {
  if (holds(u)) return;
  parts_[u] = unit.copy_part(group_->rank(), group_->size());
  ledger_.allocate(MemoryCategory::kGatheredParams, int64_t(parts_[u].nbytes()));
}

void SecondaryPartitions::drop_all() {
  for (at::Tensor& part : parts_) {
    if (!part.defined()) continue;
    ledger_.release(MemoryCategory::kGatheredParams, int64_t(part.nbytes()));
    part = at::Tensor();
  }
}

}  // namespace deepshard::zero
