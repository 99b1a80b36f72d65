// FetchCheck: every ZeRO-3 unit all-gather is checked against the other ranks'. Before a unit's
// slices are gathered, each rank of the gathering group (the job's ranks, or hpZ's group:
// secondary_partition.h) all-gathers a tag of three integers (the unit, the number of
// gathers so far and a running hash of every unit gathered before); when the gather is waited
// for, the ranks' tags must be equal. Collectives pair by order, so a rank that gathers another
// unit (another branch, another order, before or after the trace was recorded) would otherwise
// receive the slices of a different unit of the same size and train on wrong weights. With the
// check every rank instead fails with an error naming the gather, the first differing rank and
// both units. Cost: one asynchronous all-gather of 3 integers per unit gather (in flight
// together with the unit's own gather).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "deepshard/comm/group.h"

namespace deepshard::zero {

class FetchCheck {
 public:
  // `names`: the units' names (for messages); one check may be in flight per unit.
  explicit FetchCheck(std::vector<std::string> names);

  // Starts the exchange of the tag of unit `unit`'s gather; call right before starting it.
  void start(comm::Group& group, size_t unit);
  // Waits for the tag exchange of unit `unit` (if one is in flight) and throws Error when another
  // rank gathered another unit (or gathered a different sequence before).
  void finish(size_t unit);

  uint64_t gathers() const { return gathers_; }

 private:
  struct Pending {
    comm::Work work;
    // Allocated at the unit's first check and reused: a fresh pair per gather would be counted as
    // activations by the activation meter while a prefetched check is pending at a forward's end.
    at::Tensor in;    // [3]
    at::Tensor tags;  // [size, 3] (rows for the largest group checked)
    int rank = 0;
    int ranks = 0;  // of the group in flight
    bool active = false;
  };
  std::string name(int64_t unit) const;

  std::vector<std::string> names_;
  std::vector<Pending> pending_;
  uint64_t gathers_ = 0;
  uint64_t hash_ = 0x9e3779b97f4a7c15ULL;
};

}  // namespace deepshard::zero
