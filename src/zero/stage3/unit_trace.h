// UnitTrace: the order in which ZeRO-3 units are fetched during one pass: a forward + backward
// (DeepSpeed's trace in PartitionedParameterCoordinator), or, when later forwards run before a
// backward (a pipeline's 1F1B schedule), until every forward's backward has run. The first pass
// records it; the ranks then compare
// their recordings (a rank that ran another sequence gets an error naming the first differing
// position, unit and rank instead of mismatched collectives later); later passes follow it, so
// the engine knows which units come next and can prefetch them. A pass that departs from the
// trace invalidates it (one warning) and the next pass records it afresh. (Ranks departing
// differently are caught earlier, at the first mismatched gather: fetch_check.h.)
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "deepshard/comm/group.h"

namespace deepshard::zero {

class UnitTrace {
 public:
  // `names`: the units' names, for messages.
  explicit UnitTrace(std::vector<std::string> names) : names_(std::move(names)) {}

  // Unit `unit` is fetched (for its forward or its backward). Returns whether the pass follows a
  // complete trace (then upcoming() is meaningful).
  bool on_fetch(size_t unit);
  // The units after the current position, in trace order (empty unless following).
  std::vector<size_t> upcoming() const;
  // Ends a pass (after a backward; a collective): a recording pass is compared across ranks and
  // becomes the trace, a departed pass on any rank makes every rank record the next one; the
  // position goes back to the start.
  void end_pass(comm::Group& group);

  bool complete() const { return mode_ == Mode::kFollow; }
  const std::vector<size_t>& units() const { return trace_; }

 private:
  void check_same_on_every_rank(comm::Group& group) const;

  enum class Mode { kRecord, kFollow };
  std::vector<std::string> names_;
  Mode mode_ = Mode::kRecord;
  std::vector<size_t> trace_;
  size_t position_ = 0;
  bool warned_ = false;
  bool invalid_pass_ = false;  // this pass departed from the trace
};

}  // namespace deepshard::zero
