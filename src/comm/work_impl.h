// Work::Impl: one collective in flight. It owns the transport's handle (null when the operation
// completed at issue), the local post-processing to run once the transfer is done (a sum, an
// average, a copy back from a scratch buffer), and what the comm log and error messages need.
// REQUIRES: the Group (and so its CommLog) outlives every Work it returned.
#pragma once

#include <ATen/core/Tensor.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "deepshard/comm/group.h"

namespace deepshard::comm {

// What a collective is, for the log and for error messages.
struct OpInfo {
  std::string op;  // "all_reduce", "all_gather", ...
  int rank = 0;
  int64_t numel = 0;
  at::ScalarType dtype = at::kFloat;
  int64_t bytes = 0;  // payload bytes this rank handed to the collective
  // The link class it is also recorded under (nullopt: a hierarchical collective, whose stages
  // record themselves).
  std::optional<LinkClass> link;
};

// "rank R: all_reduce of N elements (float)", the start of every message about a collective.
std::string describe(const OpInfo& info);
// describe(info) + " failed: <reason>"
std::string describe_failure(const OpInfo& info, const std::string& reason);

class Work::Impl {
 public:
  using Clock = std::chrono::steady_clock;
  Impl(OpInfo info, CommLog& log, Clock::time_point start, c10::intrusive_ptr<c10d::Work> work,
       std::function<void()> finish);
  void wait();
  bool completed() const { return waited_; }
  const OpInfo& info() const { return info_; }

 private:
  OpInfo info_;
  CommLog& log_;
  Clock::time_point start_;
  c10::intrusive_ptr<c10d::Work> work_;
  std::function<void()> finish_;
  // When the transfer completed, set from the transport's thread (ns since start_; -1: not yet).
  std::shared_ptr<std::atomic<int64_t>> transfer_ns_;
  bool waited_ = false;
};

}  // namespace deepshard::comm
