// What moves the bytes of deepshard's collectives. A Transport runs the collectives with
// deepshard's semantics (group.h) on validated, contiguous, non-empty tensors of any supported
// dtype (bf16 included) and returns a started transfer: a handle (null when it finished at issue)
// and the local post-processing that Work::wait() runs after it (may be empty). Implementations:
//  - PrimitiveTransport (primitive_transport.h): composes them from all-reduce, all-to-all and
//    broadcast; Gloo over TCP and the one-rank local transport are primitive transports;
//  - the shared-memory transport (shm_transport.cpp) for ranks on one host;
//  - the hierarchical transport (hierarchical_transport.cpp) for ranks on several hosts.
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <functional>
#include <memory>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "deepshard/comm/group.h"
#include "deepshard/comm/rendezvous.h"
#include "deepshard/util/error.h"

namespace deepshard::comm {

class Transport {
 public:
  using Handle = c10::intrusive_ptr<c10d::Work>;
  struct Started {
    Handle handle;                 // null: finished at issue
    std::function<void()> finish;  // run by Work::wait() after the transfer (may be empty)
  };
  virtual ~Transport() = default;
  virtual const char* name() const = 0;

  virtual Started all_reduce(const at::Tensor& tensor, ReduceOp op) = 0;
  virtual Started all_gather(const at::Tensor& out, const at::Tensor& in) = 0;
  virtual Started reduce_scatter(const at::Tensor& out, const at::Tensor& in, ReduceOp op) = 0;
  virtual Started broadcast(const at::Tensor& tensor, int root) = 0;
  // `in` and `out` hold world-size equal slices: slice r of `in` goes to rank r, and rank r's
  // slice for this rank lands in slice r of `out` (all_to_all.h).
  virtual Started all_to_all(const at::Tensor& out, const at::Tensor& in) = 0;
  virtual Handle barrier() = 0;
};

// World size 1: no network; all-to-all is a copy, the rest complete at once.
std::unique_ptr<Transport> make_local_transport();

class StoreServer;
class JobWatch;

// This rank's part in the job's store (store.cpp): rank 0 hosts the store (store_server.h: it
// listens on info.master_addr only, admits only info.job_token, and tells every rank at once when
// one is lost); every rank holds a client connection (the c10d::Store the transports rendezvous
// through) and a watch connection (job_store.h: a lost rank stops this process, even one blocked
// in a collective). Destroyed without an exception in flight, the rank leaves the job cleanly
// (rank 0 keeps the store up until every rank has left, or the timeout); destroyed while an
// exception unwinds (or not at all: the process died), the others are told this rank was lost.
// Must outlive the transport.
class JobStore {
 public:
  JobStore(const RendezvousInfo& info, std::chrono::milliseconds timeout);
  ~JobStore();
  JobStore(const JobStore&) = delete;
  JobStore& operator=(const JobStore&) = delete;

  const c10::intrusive_ptr<c10d::Store>& store() const { return store_; }

 private:
  std::chrono::milliseconds timeout_;
  std::unique_ptr<StoreServer> server_;  // rank 0 only
  c10::intrusive_ptr<c10d::Store> store_;
  std::unique_ptr<JobWatch> watch_;
};

// Joins the job's store. Throws CommError naming address, port, rank and timeout when that fails
// (a port already taken, nothing answering, a refused job token).
std::unique_ptr<JobStore> connect_store(const RendezvousInfo& info,
                                        std::chrono::milliseconds timeout);

// The message of `e` (c10 errors without their backtrace).
std::string exception_text(const std::exception& e);

// Where a Gloo transport spanning hosts records how late each peer's data arrives in its
// all-to-alls (all_gather, reduce_scatter): `log`, and the job rank of a rank of the group (either
// null: no timing; the all-to-all is Gloo's own).
struct PeerTiming {
  CommLog* log = nullptr;
  std::function<int(int)> job_rank_of;
};

// Every rank joins a ProcessGroupGloo through `store`. Throws CommError naming address, port and
// rank when the rendezvous fails.
std::unique_ptr<Transport> make_gloo_transport(const RendezvousInfo& info,
                                               const c10::intrusive_ptr<c10d::Store>& store,
                                               std::chrono::milliseconds timeout,
                                               PeerTiming peers = {});

// A group spanning several hosts with the same number M > 1 of ranks on each, host-major (agreed
// by every rank through `store`): collectives in stages inside the host (shared memory) and
// across hosts (Gloo, 1/M of the payload per rank), each stage recorded in `log` under its link
// class in `peers.log` (hierarchical_transport.cpp), and the cross-host stage's peers timed
// when `peers.job_rank_of` is known. nullptr when the layout does not allow it (every rank alike).
// The log must outlive the transport.
std::unique_ptr<Transport> make_hierarchical_transport(const RendezvousInfo& info,
                                                       const c10::intrusive_ptr<c10d::Store>& store,
                                                       std::chrono::milliseconds timeout,
                                                       const PeerTiming& peers);

// The shared-memory transport cannot be made on this host (thrown by every rank alike).
class ShmUnavailable : public CommError {
 public:
  using CommError::CommError;
};

// Every rank maps one shared-memory segment created by rank 0 (its name exchanged through
// `store`); the segment's name is unlinked as soon as every rank has mapped it, so nothing is left
// in /dev/shm whatever happens next. REQUIRES: every rank on this host. Throws CommError when the
// segment cannot be made (then ShmUnavailable: the caller may fall back to Gloo).
std::unique_ptr<Transport> make_shm_transport(const RendezvousInfo& info,
                                              const c10::intrusive_ptr<c10d::Store>& store,
                                              std::chrono::milliseconds timeout);

}  // namespace deepshard::comm
