// SecondaryPartitions: ZeRO++'s hierarchical partitioning (hpZ, zero_hpz_partition_size h > 1).
// The ranks form groups of h consecutive ranks (the ranks of one node when h is the number of
// ranks per node). When a unit that was gathered from the primary slices is released, this rank
// keeps a secondary partition of it: part i (i = its index in its group) of the unit's padded flat
// storage cut into h equal parts. Until the parameters next change, every later gather of that
// unit (its backward, the next micro-batches' forwards and backwards) all-gathers those parts over
// the group alone, so a group inside a node sends nothing across nodes. The secondary partitions
// are dropped whenever the parameters change (each optimizer step, a checkpoint load), as
// DeepSpeed invalidates its secondary tensors after each step. They hold 1/h of every released
// unit (counted as gathered parameters in the memory ledger); checkpoints never see them (the
// primary slices are what is saved), so the checkpoint layout does not depend on h.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "deepshard/comm/group.h"
#include "deepshard/zero/memory_ledger.h"
#include "zero/stage3/unit.h"

namespace deepshard::zero {

class SecondaryPartitions {
 public:
  // Joins this rank's group of `partition_size` consecutive ranks of `world` (a collective over
  // `world`, with world's group options). Throws ConfigError naming the key when partition_size
  // does not divide world's size.
  SecondaryPartitions(comm::Group& world, int64_t partition_size, size_t units,
                      MemoryLedger& ledger);
  ~SecondaryPartitions();

  comm::Group& group() { return *group_; }
  // Unit u's secondary partition is held (its next gather reads it over group()).
  bool holds(size_t u) const { return parts_[u].defined(); }
  const at::Tensor& part(size_t u) const { return parts_[u]; }
  // Keeps this rank's secondary partition of `unit` (unit u, gathered) unless one is held.
  void keep(size_t u, const Stage3Unit& unit);
  // The parameters changed: every secondary partition is dropped.
  void drop_all();

 private:
  std::unique_ptr<comm::Group> group_;
  MemoryLedger& ledger_;
  std::vector<at::Tensor> parts_;
};

}  // namespace deepshard::zero
