// The hierarchical transport of a group that spans several hosts with M > 1 ranks on each (ranks
// host-major: rank = host * M + local rank): every collective runs in stages over two groups of
// its own, the M ranks of this host (shared memory, or Gloo on loopback when the segment cannot
// be made) and the K ranks of the same local rank on every host (Gloo across the hosts), so that
// each rank sends only 1/M of the payload across hosts:
//  - all_reduce: reduce-scatter inside the host, all-reduce of this rank's part across hosts,
//    all-gather inside the host (kAvg divides the part by the world size before the all-gather);
//  - reduce_scatter: the input reordered local-rank-major, reduce-scatter inside the host (each
//    rank gets the host's partial sums of the K slices it owns across hosts), reduce-scatter of
//    those across hosts;
//  - all_gather: all-gather across hosts (the K slices of this local rank), all-gather inside the
//    host, reordered host-major into `out`;
//  - broadcast: across hosts among the ranks of the root's local rank, then inside every host;
//  - all_to_all is not composed here (it is refused): code that exchanges pieces across hosts
//    runs its stages over groups of its own, as ZeRO++'s quantized gradients do.
// The stages of one collective run one after another on one thread (SerialExecutor: collectives
// in issue order). Each stage is recorded in the group's comm log under its link class
// (intra_node, cross_node): its payload bytes and how long the stage took.
#include <ATen/ATen.h>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "comm/local_reduce.h"
#include "comm/serial_executor.h"
#include "comm/transport.h"
#include "deepshard/util/error.h"
#include "util/log.h"
#include "util/stopwatch.h"

namespace deepshard::comm {
namespace {

using Clock = std::chrono::steady_clock;

class HierarchicalTransport : public Transport {
 public:
  HierarchicalTransport(const RendezvousInfo& info, const c10::intrusive_ptr<c10d::Store>& store,
                        std::chrono::milliseconds timeout, const PeerTiming& peers)
      : per_host_(info.local_world_size),
        hosts_(info.world_size / info.local_world_size),
        local_rank_(info.rank % per_host_),
        host_(info.rank / per_host_),
        log_(*peers.log) {
    RendezvousInfo node = info;
    node.job_rank = job_rank(info);
    node.rank = local_rank_;
    node.world_size = per_host_;
    node.local_rank = local_rank_;
    node.local_world_size = per_host_;
    auto node_store =
        c10::make_intrusive<c10d::PrefixStore>("deepshard/node/" + std::to_string(host_), store);
    try {
      node_ = make_shm_transport(node, node_store, timeout);
    } catch (const ShmUnavailable& e) {
      log::warn("shared-memory transport unavailable inside the node, using Gloo: ", e.what());
      node_ = make_gloo_transport(node, node_store, timeout);
    }
    RendezvousInfo cross = info;
    cross.job_rank = job_rank(info);
    cross.rank = host_;
    cross.world_size = hosts_;
    cross.local_rank = 0;
    cross.local_world_size = 1;
    PeerTiming cross_peers;  // rank h of the cross-host group is rank h * M + l of this group
    if (peers.job_rank_of) {
      cross_peers = {peers.log, [of = peers.job_rank_of, m = per_host_, l = local_rank_](int h) {
                       return of(h * m + l);
                     }};
    }
    cross_ = make_gloo_transport(cross,
                                 c10::make_intrusive<c10d::PrefixStore>(
                                     "deepshard/cross/" + std::to_string(local_rank_), store),
                                 timeout, cross_peers);
    name_ = std::string(node_->name()) + "+gloo";
  }

  ~HierarchicalTransport() override { executor_.reset(); }  // runs what is queued first

  const char* name() const override { return name_.c_str(); }

  Started all_reduce(const at::Tensor& tensor, ReduceOp op) override {
    return {executor_->submit([=, this] { run_all_reduce(tensor, op); }), nullptr};
  }
  Started all_gather(const at::Tensor& out, const at::Tensor& in) override {
    return {executor_->submit([=, this] { run_all_gather(out, in); }), nullptr};
  }
  Started reduce_scatter(const at::Tensor& out, const at::Tensor& in, ReduceOp op) override {
    return {executor_->submit([=, this] { run_reduce_scatter(out, in, op); }), nullptr};
  }
  Started broadcast(const at::Tensor& tensor, int root) override {
    return {executor_->submit([=, this] { run_broadcast(tensor, root); }), nullptr};
  }
  Started all_to_all(const at::Tensor& out, const at::Tensor&) override {
    throw CommError(detail::concat(
        "all_to_all of ", out.numel(), " elements over a group spanning ", hosts_,
        " hosts: not supported by the hierarchical transport (run it over the node's group and "
        "the cross-node group, or make the group with transport \"gloo\")"));
  }
  Handle barrier() override {
    return executor_->submit([this] {
      stage(LinkClass::kIntraNode, 0, [&] { return Started{node_->barrier(), nullptr}; });
      stage(LinkClass::kCrossNode, 0, [&] { return Started{cross_->barrier(), nullptr}; });
      stage(LinkClass::kIntraNode, 0, [&] { return Started{node_->barrier(), nullptr}; });
    });
  }

 private:
  // Runs one stage to completion on `t` and records it under `link`.
  template <typename Issue>
  void stage(LinkClass link, int64_t bytes, Issue issue) {
    const auto start = Clock::now();
    Started started = issue();
    if (started.handle) started.handle->wait();
    if (started.finish) started.finish();
    const double seconds = util::seconds_since(start);
    log_.record_link(link, bytes, seconds, seconds);
  }

  static ReduceOp summing(ReduceOp op) { return op == ReduceOp::kAvg ? ReduceOp::kSum : op; }

  void run_all_reduce(const at::Tensor& tensor, ReduceOp op) {
    const int64_t n = tensor.numel();
    const int64_t part_numel = (n + per_host_ - 1) / per_host_;
    at::Tensor flat = tensor.view({-1});
    at::Tensor padded = flat;
    if (part_numel * per_host_ != n) {
      padded = at::zeros({part_numel * per_host_}, tensor.options());
      padded.narrow(0, 0, n).copy_(flat);
    }
    at::Tensor part = at::empty({part_numel}, tensor.options());
    const ReduceOp sum = summing(op);
    stage(LinkClass::kIntraNode, padded.nbytes(),
          [&] { return node_->reduce_scatter(part, padded, sum); });
    stage(LinkClass::kCrossNode, part.nbytes(), [&] { return cross_->all_reduce(part, sum); });
    if (op == ReduceOp::kAvg) divide_in_place(part, int64_t(per_host_) * hosts_);
    stage(LinkClass::kIntraNode, part.nbytes(), [&] { return node_->all_gather(padded, part); });
    if (!padded.is_same(flat)) flat.copy_(padded.narrow(0, 0, n));
  }

  void run_reduce_scatter(const at::Tensor& out, const at::Tensor& in, ReduceOp op) {
    const int64_t c = out.numel();
    // [host][local][c] -> [local][host][c]: the slices local rank l owns on every host, together.
    const at::Tensor by_local = in.view({hosts_, per_host_, c}).transpose(0, 1).contiguous();
    at::Tensor partial = at::empty({hosts_ * c}, in.options());
    const ReduceOp sum = summing(op);
    stage(LinkClass::kIntraNode, by_local.nbytes(),
          [&] { return node_->reduce_scatter(partial, by_local.view({-1}), sum); });
    stage(LinkClass::kCrossNode, partial.nbytes(),
          [&] { return cross_->reduce_scatter(out.view({-1}), partial, sum); });
    if (op == ReduceOp::kAvg) divide_in_place(out, int64_t(per_host_) * hosts_);
  }

  void run_all_gather(const at::Tensor& out, const at::Tensor& in) {
    const int64_t c = in.numel();
    at::Tensor across = at::empty({hosts_ * c}, in.options());
    stage(LinkClass::kCrossNode, in.nbytes(),
          [&] { return cross_->all_gather(across, in.view({-1})); });
    at::Tensor by_local = at::empty({per_host_ * hosts_ * c}, in.options());
    stage(LinkClass::kIntraNode, across.nbytes(),
          [&] { return node_->all_gather(by_local, across); });
    out.view({hosts_, per_host_, c}).copy_(by_local.view({per_host_, hosts_, c}).transpose(0, 1));
  }

  void run_broadcast(const at::Tensor& tensor, int root) {
    const int root_host = root / per_host_, root_local = root % per_host_;
    if (local_rank_ == root_local) {
      stage(LinkClass::kCrossNode, tensor.nbytes(),
            [&] { return cross_->broadcast(tensor, root_host); });
    }
    stage(LinkClass::kIntraNode, tensor.nbytes(),
          [&] { return node_->broadcast(tensor, root_local); });
  }

  const int per_host_, hosts_, local_rank_, host_;
  CommLog& log_;
  std::unique_ptr<Transport> node_, cross_;
  std::string name_;  // "shm+gloo": inside the hosts, across them
  std::unique_ptr<SerialExecutor> executor_ = std::make_unique<SerialExecutor>();
};

// Every rank of the group answers the same: is the layout host-major with the same number of
// ranks (more than one, fewer than all) on every host? Agreed through the store, so that a job
// whose hosts differ (uneven Slurm tasks) falls back to flat Gloo on every rank at once.
bool agree_on_hierarchy(const RendezvousInfo& info, c10d::Store& store) {
  const int m = info.local_world_size;
  auto text = [](int64_t v) {
    const std::string s = std::to_string(v);
    return std::vector<uint8_t>(s.begin(), s.end());
  };
  if (info.rank == 0) store.set("deepshard/topology/per_host", text(m));
  const std::vector<uint8_t> m0_bytes = store.get("deepshard/topology/per_host");
  const int m0 = std::stoi(std::string(m0_bytes.begin(), m0_bytes.end()));
  const bool regular = m == m0 && info.world_size % m == 0 && info.local_rank == info.rank % m;
  store.add("deepshard/topology/irregular", regular ? 0 : 1);
  if (store.add("deepshard/topology/arrived", 1) == info.world_size) {
    store.set("deepshard/topology/done", text(1));
  }
  store.wait({"deepshard/topology/done"});
  const bool all_regular = store.add("deepshard/topology/irregular", 0) == 0;
  return all_regular && m0 > 1 && m0 < info.world_size;
}

}  // namespace

std::unique_ptr<Transport> make_hierarchical_transport(const RendezvousInfo& info,
                                                       const c10::intrusive_ptr<c10d::Store>& store,
                                                       std::chrono::milliseconds timeout,
                                                       const PeerTiming& peers) {
  DS_CHECK(peers.log != nullptr, CommError, "the hierarchical transport needs a comm log");
  if (!agree_on_hierarchy(info, *store)) return nullptr;
  return std::make_unique<HierarchicalTransport>(info, store, timeout, peers);
}

}  // namespace deepshard::comm
