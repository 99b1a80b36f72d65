// Group::create and the part of deepshard's collectives every transport shares: validation
// (every message names the rank, the op, the size and the dtype), empty tensors, timing and the
// comm log. How the bytes move is the transport's (transport.h, docs/comm.md).
#include "deepshard/comm/group.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "comm/all_to_all.h"
#include "comm/derived_groups.h"
#include "comm/transport.h"
#include "comm/transport_options.h"
#include "comm/work_impl.h"
#include "deepshard/util/error.h"
#include "util/log.h"

namespace deepshard::comm {
namespace {

using Clock = Work::Impl::Clock;

bool gloo_moves(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
    case at::kDouble:
    case at::kHalf:
    case at::kBFloat16:  // as fp16 bits
    case at::kLong:
    case at::kInt:
    case at::kChar:
    case at::kByte:
      return true;
    default:
      return false;
  }
}

class FlatGroup : public Group {
 public:
  // `link`: the class every collective is recorded under (nullopt: the transport records its
  // stages itself). The transport may be set later (set_transport) when it needs the log.
  FlatGroup(const RendezvousInfo& info, std::unique_ptr<Transport> transport,
            std::optional<LinkClass> link, c10::intrusive_ptr<c10d::Store> store = {},
            std::unique_ptr<JobStore> job = nullptr)
      : info_(info),
        link_(link),
        job_(std::move(job)),
        transport_(std::move(transport)),
        store_(std::move(store)) {}

  void set_transport(std::unique_ptr<Transport> transport, std::optional<LinkClass> link) {
    transport_ = std::move(transport);
    link_ = link;
  }
  void set_options(const GroupOptions& options) { options_ = options; }
  const GroupOptions& options() const { return options_; }
  void record_into(CommLog& log) { recorder_ = &log; }

  int rank() const override { return info_.rank; }
  int size() const override { return info_.world_size; }
  const RendezvousInfo& info() const override { return info_; }
  CommLog& log() override { return *recorder_; }

  const char* transport() const { return transport_->name(); }
  // The job's store (null for one rank); sub-groups rendezvous through it under their own prefix.
  const c10::intrusive_ptr<c10d::Store>& store() const { return store_; }

  Work all_reduce_async(const at::Tensor& tensor, ReduceOp op) override {
    OpInfo info = describe_op("all_reduce", tensor, tensor.nbytes());
    check_movable(info, tensor, "tensor");
    if (tensor.numel() == 0) return start(info, nullptr);
    return start(info, [&] { return transport_->all_reduce(tensor, op); });
  }

  Work all_gather_async(const at::Tensor& out, const at::Tensor& in) override {
    OpInfo info = describe_op("all_gather", in, in.nbytes());
    check_pair(info, out, in, out.numel() == in.numel() * size(), "out.numel() == in.numel() * ");
    if (in.numel() == 0) return start(info, nullptr);
    return start(info, [&] { return transport_->all_gather(out, in); });
  }

  Work reduce_scatter_async(const at::Tensor& out, const at::Tensor& in, ReduceOp op) override {
    OpInfo info = describe_op("reduce_scatter", in, in.nbytes());
    check_pair(info, out, in, in.numel() == out.numel() * size(), "in.numel() == out.numel() * ");
    if (in.numel() == 0) return start(info, nullptr);
    return start(info, [&] { return transport_->reduce_scatter(out, in, op); });
  }

  Work broadcast_async(const at::Tensor& tensor, int root) override {
    OpInfo info = describe_op("broadcast", tensor, tensor.nbytes());
    check_movable(info, tensor, "tensor");
    DS_CHECK(root >= 0 && root < size(), Error, describe(info), ": root ", root,
             " is not a rank of a group of ", size());
    if (tensor.numel() == 0) return start(info, nullptr);
    return start(info, [&] { return transport_->broadcast(tensor, root); });
  }

  Work all_to_all_async(const at::Tensor& out, const at::Tensor& in) {
    OpInfo info = describe_op("all_to_all", in, in.nbytes());
    check_pair(info, out, in, out.numel() == in.numel() && in.numel() % size() == 0,
               "out.numel() == in.numel(), a multiple of ");
    if (in.numel() == 0) return start(info, nullptr);
    return start(info, [&] { return transport_->all_to_all(out, in); });
  }

  void barrier() override {
    OpInfo info{"barrier", rank(), 0, at::kByte, 0, link_};
    auto start_time = Clock::now();
    Work(std::make_unique<Work::Impl>(info, *recorder_, start_time, transport_->barrier(), nullptr))
        .wait();
  }

 private:
  OpInfo describe_op(const char* op, const at::Tensor& t, size_t bytes) const {
    DS_CHECK(t.defined(), Error, "rank ", rank(), ": ", op, " of an undefined tensor");
    return OpInfo{op, rank(), t.numel(), t.scalar_type(), static_cast<int64_t>(bytes), link_};
  }

  void check_movable(const OpInfo& info, const at::Tensor& t, const char* name) const {
    DS_CHECK(t.defined(), Error, describe(info), ": ", name, " is undefined");
    DS_CHECK(t.scalar_type() != at::kBool, Error, describe(info), ": ", name,
             " is bool, which Gloo cannot move; use uint8");
    DS_CHECK(gloo_moves(t.scalar_type()), Error, describe(info), ": ", name, " has dtype ",
             c10::toString(t.scalar_type()),
             "; supported: float, double, half, bfloat16, int64, int32, int8, uint8");
    DS_CHECK(t.is_contiguous(), Error, describe(info), ": ", name, " must be contiguous");
  }

  void check_pair(const OpInfo& info, const at::Tensor& out, const at::Tensor& in, bool sizes_match,
                  const char* size_rule) const {
    check_movable(info, in, "in");
    check_movable(info, out, "out");
    DS_CHECK(out.scalar_type() == in.scalar_type(), Error, describe(info), ": out has dtype ",
             c10::toString(out.scalar_type()), " but in has ", c10::toString(in.scalar_type()));
    DS_CHECK(out.device() == in.device(), Error, describe(info), ": out is on ", out.device(),
             " but in is on ", in.device());
    DS_CHECK(sizes_match, Error, describe(info), ": needs ", size_rule, size(), ", got out ",
             out.numel(), " and in ", in.numel(),
             " elements (pad the buffers to a multiple of the group size)");
  }

  // Issues the transfer (if any: none for empty tensors) and wraps it with its post-processing.
  Work start(const OpInfo& info, const std::function<Transport::Started()>& issue) {
    auto start_time = Clock::now();
    Transport::Started started;
    if (issue) {
      try {
        started = issue();
      } catch (const c10::Error& e) {
        throw CommError(describe_failure(info, e.what_without_backtrace()));
      }
    }
    return Work(std::make_unique<Work::Impl>(info, *recorder_, start_time,
                                             std::move(started.handle), std::move(started.finish)));
  }

  CommLog log_;                // outlives the transport, whose thread may still record into it
  CommLog* recorder_ = &log_;  // where collectives are recorded: log_, or a parent group's
  RendezvousInfo info_;
  std::optional<LinkClass> link_;
  GroupOptions options_;           // what it was made with (its sub-groups' defaults)
  std::unique_ptr<JobStore> job_;  // outlives the transport (null for one rank)
  std::unique_ptr<Transport> transport_;
  c10::intrusive_ptr<c10d::Store> store_;
};

// The shared-memory transport when every rank of `info` is on this host (unless Gloo is asked
// for); across hosts the hierarchical transport when the layout allows, else Gloo; `store` is the
// rendezvous store of exactly these ranks. `job_rank_of` maps the group's ranks to the job's
// (null: unknown, then peers are not timed).
std::unique_ptr<Group> join(const RendezvousInfo& info, c10::intrusive_ptr<c10d::Store> store,
                            const GroupOptions& options, std::function<int(int)> job_rank_of,
                            std::unique_ptr<JobStore> job = nullptr) {
  const bool one_host = info.local_world_size == info.world_size;
  DS_CHECK(one_host || options.transport != TransportKind::kShm, CommError, "rank ", info.rank,
           ": comm.transport \"shm\" needs every rank on one host, but this job has ",
           info.local_world_size, " of its ", info.world_size,
           " ranks per host (use \"auto\" or \"gloo\")");
  const LinkClass link = one_host ? LinkClass::kIntraNode : LinkClass::kCrossNode;
  if (one_host && options.transport != TransportKind::kGloo) {
    try {
      return std::make_unique<FlatGroup>(info, make_shm_transport(info, store, options.timeout),
                                         link, store, std::move(job));
    } catch (const ShmUnavailable& e) {
      if (options.transport == TransportKind::kShm) throw;
      log::warn("shared-memory transport unavailable, using Gloo: ", e.what());
    }
  }
  if (one_host) {
    auto transport = make_gloo_transport(info, store, options.timeout);
    return std::make_unique<FlatGroup>(info, std::move(transport), link, store, std::move(job));
  }
  auto group = std::make_unique<FlatGroup>(info, nullptr, std::nullopt, store, std::move(job));
  const PeerTiming peers{&group->log(), job_rank_of};
  std::unique_ptr<Transport> hierarchical;
  if (options.transport == TransportKind::kAuto) {
    hierarchical = make_hierarchical_transport(info, store, options.timeout, peers);
  }
  if (hierarchical) {
    group->set_transport(std::move(hierarchical), std::nullopt);
  } else {
    group->set_transport(make_gloo_transport(info, store, options.timeout, peers), link);
  }
  return group;
}

}  // namespace

TransportKind parse_transport(const std::string& text, const std::string& where) {
  if (text == "auto") return TransportKind::kAuto;
  if (text == "gloo") return TransportKind::kGloo;
  if (text == "shm") return TransportKind::kShm;
  throw CommError(where + ": unknown transport \"" + text + "\" (expected auto, gloo or shm)");
}

const char* to_string(TransportKind kind) {
  switch (kind) {
    case TransportKind::kAuto:
      return "auto";
    case TransportKind::kGloo:
      return "gloo";
    case TransportKind::kShm:
      return "shm";
  }
  return "?";
}

namespace {

// Records the options a group was made with (every group is a FlatGroup).
std::unique_ptr<Group> remembering(std::unique_ptr<Group> group, const GroupOptions& options) {
  static_cast<FlatGroup&>(*group).set_options(options);
  return group;
}

}  // namespace

GroupOptions options_of(const Group& group) {
  auto* flat = dynamic_cast<const FlatGroup*>(&group);
  return flat != nullptr ? flat->options() : GroupOptions{};
}

void record_into(Group& group, Group& parent) {
  auto* flat = dynamic_cast<FlatGroup*>(&group);
  DS_CHECK(flat != nullptr, CommError, "record_into: not a group made by create_group");
  flat->record_into(parent.log());
}

Work all_to_all_async(Group& group, const at::Tensor& out, const at::Tensor& in) {
  auto* flat = dynamic_cast<FlatGroup*>(&group);
  DS_CHECK(flat != nullptr, CommError, "all_to_all: not a group made by create_group");
  return flat->all_to_all_async(out, in);
}

const char* transport_name(const Group& group) {
  auto* flat = dynamic_cast<const FlatGroup*>(&group);
  return flat != nullptr ? flat->transport() : "?";
}

std::unique_ptr<Group> Group::create(const RendezvousInfo& info,
                                     std::chrono::milliseconds timeout) {
  GroupOptions options;
  options.timeout = timeout;
  return create_group(info, options);
}

std::unique_ptr<Group> create_group(const RendezvousInfo& info, const GroupOptions& options) {
  DS_CHECK(info.world_size >= 1 && info.rank >= 0 && info.rank < info.world_size, CommError,
           "Group::create: rank ", info.rank, " is not in a world of ", info.world_size);
  DS_CHECK(options.timeout.count() > 0, CommError, "Group::create: timeout must be positive, got ",
           options.timeout.count(), " ms");
  if (info.world_size == 1) {
    return remembering(
        std::make_unique<FlatGroup>(info, make_local_transport(), LinkClass::kIntraNode), options);
  }
  auto job = connect_store(info, options.timeout);
  const auto store = job->store();
  return remembering(join(
                         info, store, options, [](int r) { return r; }, std::move(job)),
                     options);
}

std::unique_ptr<Group> create_subgroup(const Group& world, const std::vector<int>& members,
                                       const std::string& name, const GroupOptions& options) {
  const RendezvousInfo& whole = world.info();
  const std::string where = detail::concat("rank ", world.rank(), ": sub-group \"", name, "\"");
  DS_CHECK(!members.empty(), CommError, where, " has no members");
  int index = -1;
  for (size_t i = 0; i < members.size(); ++i) {
    DS_CHECK(members[i] >= 0 && members[i] < world.size(), CommError, where, ": member ",
             members[i], " is not a rank of a group of ", world.size());
    DS_CHECK(i == 0 || members[i] > members[i - 1], CommError, where,
             ": members must be ascending and distinct");
    if (members[i] == world.rank()) index = static_cast<int>(i);
  }
  DS_CHECK(index >= 0, CommError, where, ": this rank is not among its members");
  DS_CHECK(options.timeout.count() > 0, CommError, where, ": timeout must be positive");
  RendezvousInfo sub = whole;
  sub.job_rank = job_rank(whole);
  sub.rank = index;
  sub.world_size = static_cast<int>(members.size());
  sub.local_rank = index;
  // Hosts hold consecutive global ranks (the launcher's RANK = node * ranks per node + local).
  const int per_host = std::max(1, whole.local_world_size);
  const int host = world.rank() / per_host;
  sub.local_world_size = 0;
  for (int m : members) sub.local_world_size += m / per_host == host ? 1 : 0;
  if (sub.world_size == 1) {
    return remembering(
        std::make_unique<FlatGroup>(sub, make_local_transport(), LinkClass::kIntraNode), options);
  }
  auto* flat = dynamic_cast<const FlatGroup*>(&world);
  DS_CHECK(flat != nullptr && flat->store(), CommError, where,
           ": the parent group has no rendezvous store");
  auto store = c10::make_intrusive<c10d::PrefixStore>("deepshard/group/" + name, flat->store());
  std::function<int(int)> job_rank_of;  // known when `world` is the job's group
  if (whole.job_rank < 0) job_rank_of = [members](int r) { return members[size_t(r)]; };
  return remembering(join(sub, store, options, job_rank_of), options);
}

}  // namespace deepshard::comm
