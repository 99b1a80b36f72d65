// Implementation of UnitTrace (see unit_trace.h).
#include "zero/stage3/unit_trace.h"

#include <torch/torch.h>

#include "deepshard/util/error.h"
#include "util/log.h"

namespace deepshard::zero {

bool UnitTrace::on_fetch(size_t unit) {
  if (mode_ == Mode::kRecord) {
    trace_.push_back(unit);
    ++position_;
    return false;
  }
  if (position_ < trace_.size() && trace_[position_] == unit) {
    ++position_;
    return true;
  }
  if (!warned_) {
    log::warn("ZeRO-3: unit ", names_.at(unit), " fetched at position ", position_,
              " departs from the recorded order (",
              position_ < trace_.size() ? names_.at(trace_[position_]) : "end of trace",
              " expected); prefetching stops and the order is recorded again");
    warned_ = true;
  }
  mode_ = Mode::kRecord;
  trace_.clear();
  position_ = 0;
  // The rest of this pass is recorded from here on: it is not a whole pass, so it is dropped at
  // end_pass() and the next pass records.
  invalid_pass_ = true;
  return false;
}

std::vector<size_t> UnitTrace::upcoming() const {
  if (mode_ != Mode::kFollow) return {};
  return std::vector<size_t>(trace_.begin() + std::ptrdiff_t(position_), trace_.end());
}

void UnitTrace::end_pass(comm::Group& group) {
  // The ranks agree on the transition (any rank departed: all record again; all recorded: compare
  // and follow), so the comparison below is entered by every rank or by none.
  at::Tensor flags = torch::tensor(
      {invalid_pass_ ? int64_t(1) : int64_t(0), mode_ == Mode::kRecord ? int64_t(1) : int64_t(0)},
      torch::kLong);
  if (group.size() > 1) group.all_reduce(flags, comm::ReduceOp::kMax);
  if (flags[0].item<int64_t>() != 0) {
    mode_ = Mode::kRecord;
    trace_.clear();
  } else if (flags[1].item<int64_t>() != 0) {
    check_same_on_every_rank(group);
    mode_ = Mode::kFollow;
  }
  invalid_pass_ = false;
  position_ = 0;
}

void UnitTrace::check_same_on_every_rank(comm::Group& group) const {
  const int n = group.size();
  if (n == 1) return;
  at::Tensor length = torch::tensor({int64_t(trace_.size())}, torch::kLong);
  group.all_reduce(length, comm::ReduceOp::kMax);
  const int64_t longest = length.item<int64_t>();
  // Every rank's sequence, padded with -1 (a shorter sequence differs where it ends).
  at::Tensor mine = torch::full({longest + 1}, int64_t(-1), torch::kLong);
  for (size_t i = 0; i < trace_.size(); ++i) mine[int64_t(i)] = int64_t(trace_[i]);
  at::Tensor all = torch::empty({n * (longest + 1)}, torch::kLong);
  group.all_gather(all, mine);
  const auto sequences = all.view({n, longest + 1});
  auto name = [&](int64_t unit) { return unit < 0 ? std::string("nothing") : names_.at(unit); };
  for (int64_t i = 0; i <= longest; ++i) {
    const int64_t first = sequences[0][i].item<int64_t>();
    for (int r = 1; r < n; ++r) {
      const int64_t other = sequences[r][i].item<int64_t>();
      DS_CHECK(other == first, Error,
               "ZeRO-3: the ranks ran different unit sequences: at position ", i,
               " rank 0 fetched ", name(first), " but rank ", r, " fetched ", name(other),
               " (this rank is ", group.rank(),
               "); every rank must run the same modules in the same order");
    }
  }
}

}  // namespace deepshard::zero
