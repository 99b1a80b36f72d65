// A data-parallel process group and deepshard's collectives on flat buffers. Every collective has
// an async form returning a Work handle (start now, wait later) and a blocking form. This is the
// only interface ZeRO code uses: nothing outside src/comm includes c10d headers, so a faster
// transport (shared memory, MPI, NCCL) can replace Gloo here alone.
//
// Semantics on this Gloo build (libtorch 1.13, see docs/design.md §1-2):
//  - all_gather: `out` holds size() equal slices; slice r receives rank r's `in`.
//  - reduce_scatter: `in` holds size() equal slices; `out` receives the sum over ranks of slice
//    rank(). Built from all-to-all plus a local sum in fp32 (same bytes on the wire as a ring).
//  - bf16 tensors move as a bit-identical fp16 view; sums of bf16 happen locally in fp32.
//  - every collective fails with CommError after the group's timeout instead of hanging.
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "deepshard/comm/comm_log.h"
#include "deepshard/comm/rendezvous.h"

namespace deepshard::comm {

enum class ReduceOp { kSum, kAvg, kMax, kMin };

// A handle on a collective in flight. wait() blocks until it completes (running any local
// post-processing, such as reduce-scatter's sum) and throws CommError on failure or timeout.
// Waiting twice is a no-op. Destroying an unwaited handle waits (errors are then logged).
class Work {
 public:
  class Impl;
  Work();
  explicit Work(std::unique_ptr<Impl> impl);
  Work(Work&&) noexcept;
  Work& operator=(Work&&) noexcept;
  ~Work();
  void wait();
  bool completed() const;  // true once wait() has returned (or nothing was started)

 private:
  std::unique_ptr<Impl> impl_;
};

class Group {
 public:
  // Joins the group described by `info` (rank 0 hosts the TCP store). world_size 1 needs no
  // network. `timeout` bounds rendezvous and every collective.
  static std::unique_ptr<Group> create(const RendezvousInfo& info,
                                       std::chrono::milliseconds timeout);
  virtual ~Group() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const RendezvousInfo& info() const = 0;

  // In place over `tensor` (contiguous). kAvg divides by size() after the sum.
  virtual Work all_reduce_async(const at::Tensor& tensor, ReduceOp op = ReduceOp::kSum) = 0;
  // out.numel() == in.numel() * size(); both contiguous, same dtype.
  virtual Work all_gather_async(const at::Tensor& out, const at::Tensor& in) = 0;
  // in.numel() == out.numel() * size(); both contiguous. kSum or kAvg.
  virtual Work reduce_scatter_async(const at::Tensor& out, const at::Tensor& in,
                                    ReduceOp op = ReduceOp::kSum) = 0;
  virtual Work broadcast_async(const at::Tensor& tensor, int root) = 0;
  virtual void barrier() = 0;

  void all_reduce(const at::Tensor& t, ReduceOp op = ReduceOp::kSum) { all_reduce_async(t, op).wait(); }
  void all_gather(const at::Tensor& out, const at::Tensor& in) { all_gather_async(out, in).wait(); }
  void reduce_scatter(const at::Tensor& out, const at::Tensor& in, ReduceOp op = ReduceOp::kSum) {
    reduce_scatter_async(out, in, op).wait();
  }
  void broadcast(const at::Tensor& t, int root) { broadcast_async(t, root).wait(); }

  // Counts, bytes and seconds per collective since the start (or the last reset).
  virtual CommLog& log() = 0;
};

}  // namespace deepshard::comm
