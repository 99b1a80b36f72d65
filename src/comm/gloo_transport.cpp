// The Gloo transport: a ProcessGroupGloo joined through the job's store (store.cpp, wrapped in a
// PrefixStore) whose timeout bounds every operation. Device choice (see
// docs/comm.md): GLOO_SOCKET_IFNAME when set; loopback when every rank is on this node; otherwise
// the local address of the interface that routes to MASTER_ADDR, so that peers on other machines
// can connect (gethostname-based createDefaultDevice silently falls back to loopback when the
// hostname does not resolve, which only fails later as a timeout). No route to MASTER_ADDR, or a
// route through loopback while the job spans hosts, is a CommError saying what to set. A group
// spanning hosts exchanges its all-to-alls pair by pair, timing each peer's arrival (PeerTiming).
#include <algorithm>
#include <thread>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "comm/primitive_transport.h"
#include "comm/serial_executor.h"
#include "deepshard/util/error.h"
#include "util/net_address.h"

namespace deepshard::comm {
namespace {

std::shared_ptr<::gloo::transport::Device> make_device(const RendezvousInfo& info) {
  using c10d::ProcessGroupGloo;
  if (!info.socket_ifname.empty()) {
    try {
      return ProcessGroupGloo::createDeviceForInterface(info.socket_ifname);
    } catch (const std::exception& e) {
      throw CommError(detail::concat("rank ", info.rank, ": GLOO_SOCKET_IFNAME=",
                                     info.socket_ifname, " cannot be used: ", exception_text(e)));
    }
  }
  if (info.local_world_size == info.world_size) {
    return ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  }
  const auto address = net::local_address_towards(info.master_addr, info.master_port);
  DS_CHECK(address.has_value(), CommError, "rank ", info.rank, ": no route from this host to ",
           "MASTER_ADDR=", info.master_addr,
           " (the host of rank 0), so the address the other nodes reach this rank at is unknown; "
           "check MASTER_ADDR, or set GLOO_SOCKET_IFNAME to the interface that reaches the other "
           "nodes");
  DS_CHECK(!net::is_loopback(*address) || net::is_loopback(info.master_addr) ||
               info.master_addr == "localhost",
           CommError, "rank ", info.rank, ": MASTER_ADDR=", info.master_addr,
           " is reached through the loopback address ", *address,
           " on this host, which the other nodes of a multi-node job cannot reach; set MASTER_ADDR "
           "to an address of rank 0's host on the network, or GLOO_SOCKET_IFNAME");
  return ProcessGroupGloo::createDeviceForHostname(*address);
}

class GlooTransport : public PrimitiveTransport {
 public:
  GlooTransport(const RendezvousInfo& info, const c10::intrusive_ptr<c10d::Store>& store,
                std::chrono::milliseconds timeout, PeerTiming peers)
      : PrimitiveTransport(info.world_size),
        rank_(info.rank),
        world_size_(info.world_size),
        peers_(std::move(peers)) {
    if (peers_.log != nullptr && peers_.job_rank_of) executor_ = std::make_unique<SerialExecutor>();
    try {
      auto options = c10d::ProcessGroupGloo::Options::create(timeout);
      options->devices.push_back(make_device(info));
      pg_ = c10::make_intrusive<c10d::ProcessGroupGloo>(
          c10::make_intrusive<c10d::PrefixStore>("deepshard/dp", store), info.rank, info.world_size,
          options);
    } catch (const std::exception& e) {
      throw CommError(detail::concat("rank ", info.rank, " of ", info.world_size,
                                     ": rendezvous at ", info.master_addr, ":", info.master_port,
                                     " (timeout ", timeout.count(),
                                     " ms) failed while connecting to the other ranks: ",
                                     exception_text(e)));
    }
  }

  ~GlooTransport() override { executor_.reset(); }  // runs what is queued first

  const char* name() const override { return "gloo"; }
  Handle barrier() override { return pg_->barrier(); }

 protected:
  Handle allreduce_primitive(at::Tensor tensor, c10d::ReduceOp op) override {
    std::vector<at::Tensor> tensors{std::move(tensor)};
    c10d::AllreduceOptions options;
    options.reduceOp = op;
    return pg_->allreduce(tensors, options);
  }

  Handle alltoall_primitive(at::Tensor out, at::Tensor in) override {
    if (executor_) {
      const int tag = kPairwiseTagBase + int(next_tag_++ % kPairwiseTags);
      return executor_->submit([=, this] { pairwise_alltoall(out, in, tag); });
    }
    std::vector<int64_t> even_splits;
    return pg_->alltoall_base(out, in, even_splits, even_splits);
  }

  Handle broadcast_primitive(at::Tensor tensor, int root) override {
    std::vector<at::Tensor> tensors{std::move(tensor)};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    return pg_->broadcast(tensors, options);
  }

 private:
  // Tags of the pairwise exchanges, far above those ProcessGroupGloo gives its collectives (a
  // counter from 0), so that the two never match each other's messages.
  static constexpr int kPairwiseTagBase = 1 << 30;
  static constexpr uint64_t kPairwiseTags = 1 << 29;

  // The all-to-all as one send and one receive per peer, each receive waited for on its own
  // thread, so that the time each peer's data arrived is known: how much later than the first
  // peer's goes to the comm log (record_peer_lag).
  void pairwise_alltoall(const at::Tensor& out, const at::Tensor& in, int tag) {
    const int n = world_size_;
    const int64_t chunk = in.numel() / n;
    out.narrow(0, rank_ * chunk, chunk).copy_(in.narrow(0, rank_ * chunk, chunk));
    std::vector<Handle> sends, receives;
    std::vector<int> sources;
    for (int i = 1; i < n; ++i) {
      const int to = (rank_ + i) % n, from = (rank_ - i + n) % n;
      std::vector<at::Tensor> sent{in.narrow(0, to * chunk, chunk)};
      sends.push_back(pg_->send(sent, to, tag));
      std::vector<at::Tensor> received{out.narrow(0, from * chunk, chunk)};
      receives.push_back(pg_->recv(received, from, tag));
      sources.push_back(from);
    }
    std::vector<Clock::time_point> arrived(receives.size());
    std::vector<std::exception_ptr> errors(receives.size() + 1);
    std::vector<std::thread> waiters;
    for (size_t i = 0; i < receives.size(); ++i) {
      waiters.emplace_back([&, i] {
        try {
          receives[i]->wait();
        } catch (...) {
          errors[i] = std::current_exception();
        }
        arrived[i] = Clock::now();
      });
    }
    try {
      for (auto& send : sends) send->wait();
    } catch (...) {
      errors.back() = std::current_exception();
    }
    for (auto& t : waiters) t.join();
    for (const auto& e : errors) {
      if (e) std::rethrow_exception(e);
    }
    const auto first = *std::min_element(arrived.begin(), arrived.end());
    for (size_t i = 0; i < arrived.size(); ++i) {
      peers_.log->record_peer_lag(peers_.job_rank_of(sources[i]),
                                  std::chrono::duration<double>(arrived[i] - first).count());
    }
  }

  using Clock = std::chrono::steady_clock;
  const int rank_, world_size_;
  PeerTiming peers_;
  uint64_t next_tag_ = 0;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg_;
  std::unique_ptr<SerialExecutor> executor_;  // pairwise all-to-all (when timing peers)
};

}  // namespace

std::unique_ptr<Transport> make_gloo_transport(const RendezvousInfo& info,
                                               const c10::intrusive_ptr<c10d::Store>& store,
                                               std::chrono::milliseconds timeout,
                                               PeerTiming peers) {
  return std::make_unique<GlooTransport>(info, store, timeout, std::move(peers));
}

}  // namespace deepshard::comm
