// A transport whose collectives are composed from three primitives (Gloo's, or the copies of a
// one-rank world):
//  - all_reduce: the primitive all-reduce (kAvg: sum, then divide in wait()); bf16, which Gloo
//    cannot reduce, is all-gathered as fp16 bits and reduced locally in fp32, rank order;
//  - all_gather: all-to-all where every rank sends its whole shard to every rank (the fastest of
//    the three candidates measured, docs/comm.md), straight into `out`;
//  - reduce_scatter: all-to-all into a scratch buffer, then a local sum in rank order (fp32 or
//    wider);
//  - all_to_all: the primitive itself;
//  - bf16 always moves as a bit-identical fp16 view.
#pragma once

#include <torch/csrc/distributed/c10d/Types.hpp>

#include "comm/scratch_pool.h"
#include "comm/transport.h"

namespace deepshard::comm {

class PrimitiveTransport : public Transport {
 public:
  explicit PrimitiveTransport(int world_size) : world_size_(world_size) {}

  Started all_reduce(const at::Tensor& tensor, ReduceOp op) override;
  Started all_gather(const at::Tensor& out, const at::Tensor& in) override;
  Started reduce_scatter(const at::Tensor& out, const at::Tensor& in, ReduceOp op) override;
  Started broadcast(const at::Tensor& tensor, int root) override;
  Started all_to_all(const at::Tensor& out, const at::Tensor& in) override;

 protected:
  // The primitives, on dtypes Gloo moves (bf16 arrives as its fp16 view).
  virtual Handle allreduce_primitive(at::Tensor tensor, c10d::ReduceOp op) = 0;
  // `in` holds world-size equal slices; slice r goes to rank r, and rank r's slice for this rank
  // lands in slice r of `out`.
  virtual Handle alltoall_primitive(at::Tensor out, at::Tensor in) = 0;
  virtual Handle broadcast_primitive(at::Tensor tensor, int root) = 0;

 private:
  struct Replicated {
    at::Tensor tensor;
    std::shared_ptr<ScratchPool::Lease> lease;
  };
  // `t` repeated world-size times (in scratch unless the world is one rank): the input of an
  // all-to-all that sends t to every rank.
  Replicated replicated(const at::Tensor& t);

  int world_size_;
  ScratchPool scratch_;
};

}  // namespace deepshard::comm
