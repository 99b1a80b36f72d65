// The shared-memory transport for ranks on one host. Every collective runs on one thread per rank
// (SerialExecutor, so collectives run in issue order) through the segment of shm_segment.h, in
// rounds: a round moves at most one slot of data per rank, so any size works with a fixed segment.
// Rounds alternate between the two halves of every slot; a rank writes half h of round k only
// after passing the first barrier of round k-1, which every rank reaches only after it finished
// reading round k-2 (the same half): one barrier per round suffices (two for all_reduce).
//
// The results equal the Gloo path's bit for bit:
//  - reduce_scatter, and all_reduce of bf16, reduce the N contributions in rank order with
//    reduce_slices (fp32 blocks for fp16/bf16), exactly as the Gloo path does after its
//    all-to-all;
//  - all_reduce of the other dtypes follows Gloo's ring order (gloo_ring_order.h): each element is
//    summed with the nesting of the ring chunk it belongs to in a Gloo all-reduce of the whole
//    tensor; kAvg then divides as the Gloo path does;
//  - all_gather, all_to_all and broadcast copy bytes.
// Work split: in each round of all_reduce and reduce_scatter rank r reduces the r-th part.
#include <ATen/ATen.h>
#include <unistd.h>

#include <cstring>
#include <optional>

#include "comm/gloo_ring_order.h"
#include "comm/local_reduce.h"
#include "comm/serial_executor.h"
#include "comm/shm_barrier.h"
#include "comm/shm_segment.h"
#include "comm/transport.h"
#include "deepshard/util/error.h"

namespace deepshard::comm {
namespace {

// Per rank and half; 4 slots per rank in the segment. Measured in docs/benchmarks.md.
constexpr uint64_t kSlotBytes = 8ull << 20;

enum ShmOpKind : int32_t {
  kAllReduce = 1,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kBarrier,
  kAllToAll
};

const char* kind_name(int32_t kind) {
  switch (kind) {
    case kAllReduce:
      return "all_reduce";
    case kAllGather:
      return "all_gather";
    case kReduceScatter:
      return "reduce_scatter";
    case kBroadcast:
      return "broadcast";
    case kBarrier:
      return "barrier";
    case kAllToAll:
      return "all_to_all";
  }
  return "?";
}

uint8_t* bytes_of(const at::Tensor& t) { return static_cast<uint8_t*>(t.data_ptr()); }

// A flat tensor viewing `numel` elements at `data` (no autograd, no ownership).
at::Tensor view(void* data, int64_t numel, at::ScalarType dtype) {
  return at::from_blob(data, {numel}, at::TensorOptions().dtype(dtype));
}

void combine(const at::Tensor& acc, const at::Tensor& x, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      acc.add_(x);
      return;
    case ReduceOp::kMax:
      at::maximum_out(const_cast<at::Tensor&>(acc), acc, x);
      return;
    case ReduceOp::kMin:
      at::minimum_out(const_cast<at::Tensor&>(acc), acc, x);
      return;
  }
}

class ShmTransport : public Transport {
 public:
  ShmTransport(const RendezvousInfo& info, c10::intrusive_ptr<c10d::Store> store,
               ShmSegment segment, std::chrono::milliseconds timeout)
      : rank_(info.rank),
        n_(info.world_size),
        store_(std::move(store)),
        segment_(std::move(segment)),
        barrier_(segment_, info.rank, timeout) {}

  ~ShmTransport() override {
    executor_.reset();  // runs what is queued, then stops
  }

  const char* name() const override { return "shm"; }

  Started all_reduce(const at::Tensor& tensor, ReduceOp op) override {
    check_cpu(tensor);
    return {submit(kAllReduce, tensor, static_cast<int64_t>(op),
                   [=, this] { run_all_reduce(tensor, op); }),
            nullptr};
  }

  Started all_gather(const at::Tensor& out, const at::Tensor& in) override {
    check_cpu(in);
    check_cpu(out);
    return {submit(kAllGather, in, 0, [=, this] { run_all_gather(out, in); }), nullptr};
  }

  Started reduce_scatter(const at::Tensor& out, const at::Tensor& in, ReduceOp op) override {
    check_cpu(in);
    check_cpu(out);
    return {submit(kReduceScatter, in, static_cast<int64_t>(op),
                   [=, this] { run_reduce_scatter(out, in, op); }),
            nullptr};
  }

  Started broadcast(const at::Tensor& tensor, int root) override {
    check_cpu(tensor);
    return {submit(kBroadcast, tensor, root, [=, this] { run_broadcast(tensor, root); }),
            nullptr};
  }

  Started all_to_all(const at::Tensor& out, const at::Tensor& in) override {
    check_cpu(in);
    check_cpu(out);
    return {submit(kAllToAll, in, 0, [=, this] { run_all_to_all(out, in); }), nullptr};
  }

  Handle barrier() override {
    return submit(kBarrier, at::Tensor(), 0, [this] { sync(); });
  }

 private:
  void check_cpu(const at::Tensor& t) const {
    DS_CHECK(t.device().is_cpu(), CommError, "the shared-memory transport moves CPU tensors; got ",
             t.device(), " (use comm.transport \"gloo\")");
  }

  // Queues `op` with the descriptor every rank checks against the others' at its first barrier.
  Handle submit(int32_t kind, const at::Tensor& t, int64_t arg, std::function<void()> op) {
    ShmOpDescriptor d;
    d.seq = ++issued_;
    d.kind = kind;
    d.dtype = t.defined() ? static_cast<int32_t>(t.scalar_type()) : -1;
    d.numel = t.defined() ? t.numel() : 0;
    d.arg = arg;
    return executor_->submit([=, this] {
      if (!broken_.empty()) throw CommError("the shared-memory transport failed earlier: " + broken_);
      try {
        ShmOpDescriptor& mine = segment_.header().ranks[rank_].op[d.seq % 2];
        mine = d;  // published by the next barrier
        first_barrier_ = true;
        current_ = d;
        op();
      } catch (const std::exception& e) {
        broken_ = e.what();
        barrier_.abort(detail::concat("rank ", rank_, ": ", e.what()));
        throw;
      }
    });
  }

  // Every barrier inside a collective goes through here; the first one also checks that every
  // rank is in the same collective.
  void sync() {
    barrier_.arrive_and_wait();
    if (!first_barrier_) return;
    first_barrier_ = false;
    for (int r = 0; r < n_; ++r) {
      const ShmOpDescriptor& d = segment_.header().ranks[r].op[current_.seq % 2];
      if (d.seq == current_.seq && d.kind == current_.kind && d.dtype == current_.dtype &&
          d.numel == current_.numel && d.arg == current_.arg) {
        continue;
      }
      throw CommError(detail::concat(
          "collectives differ across ranks: this rank's collective #", current_.seq, " is ",
          kind_name(current_.kind), " of ", current_.numel, " elements (dtype ", current_.dtype,
          ", arg ", current_.arg, ") but rank ", r, "'s #", d.seq, " is ", kind_name(d.kind),
          " of ", d.numel, " elements (dtype ", d.dtype, ", arg ", d.arg, ")"));
    }
  }

  int half() const { return static_cast<int>(round_ & 1); }
  uint64_t slot_bytes() const { return segment_.slot_bytes(); }

  // The N rows [rank 0 .. N-1] of `numel` elements at byte `offset` of each rank's data slot of
  // this round's half.
  at::Tensor rows(int64_t offset, int64_t numel, at::ScalarType dtype) const {
    const int64_t stride = static_cast<int64_t>(segment_.data_slot(1, half()) -
                                                segment_.data_slot(0, half())) /
                           static_cast<int64_t>(c10::elementSize(dtype));
    return at::from_blob(segment_.data_slot(0, half()) + offset, {n_, numel}, {stride, 1},
                         at::TensorOptions().dtype(dtype));
  }

  void run_all_gather(const at::Tensor& out, const at::Tensor& in) {
    const int64_t bytes = in.nbytes();
    const int64_t per_round = static_cast<int64_t>(slot_bytes());
    for (int64_t o = 0; o < bytes; o += per_round, ++round_) {
      const int64_t len = std::min(per_round, bytes - o);
      std::memcpy(segment_.data_slot(rank_, half()), bytes_of(in) + o, len);
      sync();
      for (int r = 0; r < n_; ++r) {
        uint8_t* dst = bytes_of(out) + r * bytes + o;
        const uint8_t* src = r == rank_ ? bytes_of(in) + o : segment_.data_slot(r, half());
        if (dst != src) std::memcpy(dst, src, len);
      }
    }
  }

  void run_broadcast(const at::Tensor& t, int root) {
    const int64_t bytes = t.nbytes();
    const int64_t per_round = static_cast<int64_t>(slot_bytes());
    for (int64_t o = 0; o < bytes; o += per_round, ++round_) {
      const int64_t len = std::min(per_round, bytes - o);
      if (rank_ == root) std::memcpy(segment_.data_slot(rank_, half()), bytes_of(t) + o, len);
      sync();
      if (rank_ != root) std::memcpy(bytes_of(t) + o, segment_.data_slot(root, half()), len);
    }
  }

  void run_reduce_scatter(const at::Tensor& out, const at::Tensor& in, ReduceOp op) {
    const at::ScalarType dtype = in.scalar_type();
    const int64_t e = static_cast<int64_t>(in.element_size());
    const int64_t shard = out.numel();
    const int64_t per_round = static_cast<int64_t>(slot_bytes()) / (e * n_);
    for (int64_t o = 0; o < shard; o += per_round, ++round_) {
      const int64_t len = std::min(per_round, shard - o);
      for (int r = 0; r < n_; ++r) {
        std::memcpy(segment_.data_slot(rank_, half()) + r * len * e,
                    bytes_of(in) + (r * shard + o) * e, len * e);
      }
      sync();
      reduce_slices(rows(rank_ * len * e, len, dtype), op,
                    view(bytes_of(out) + o * e, len, dtype));
    }
  }

  // Each round: every rank copies the window of each destination's slice into its slot (as
  // reduce_scatter does); after the barrier it copies its own window from every rank's slot.
  void run_all_to_all(const at::Tensor& out, const at::Tensor& in) {
    const int64_t slice = in.nbytes() / n_;
    const int64_t per_round = static_cast<int64_t>(slot_bytes()) / n_;
    for (int64_t o = 0; o < slice; o += per_round, ++round_) {
      const int64_t len = std::min(per_round, slice - o);
      for (int r = 0; r < n_; ++r) {
        std::memcpy(segment_.data_slot(rank_, half()) + r * len, bytes_of(in) + r * slice + o, len);
      }
      sync();
      for (int r = 0; r < n_; ++r) {
        std::memcpy(bytes_of(out) + r * slice + o, segment_.data_slot(r, half()) + rank_ * len,
                    len);
      }
    }
  }

  void run_all_reduce(const at::Tensor& t, ReduceOp op) {
    const at::ScalarType dtype = t.scalar_type();
    const int64_t e = static_cast<int64_t>(t.element_size());
    const int64_t numel = t.numel();
    const int64_t per_round = static_cast<int64_t>(slot_bytes()) / e;
    const int64_t chunk = gloo_ring_chunk_elements(numel, e, n_);
    for (int64_t o = 0; o < numel; o += per_round, ++round_) {
      const int64_t len = std::min(per_round, numel - o);
      std::memcpy(segment_.data_slot(rank_, half()), bytes_of(t) + o * e, len * e);
      sync();
      auto part = [&](int r) { return len * r / n_; };
      const int64_t begin = part(rank_), end = part(rank_ + 1);
      uint8_t* result = segment_.result_slot(rank_, half());
      if (dtype == at::kBFloat16) {  // the Gloo path's all-gather + rank-order fp32 reduction
        reduce_slices(rows(begin * e, end - begin, dtype), op,
                      view(result + begin * e, end - begin, dtype));
      } else {
        for (int64_t i = begin; i < end;) {  // piece by piece of Gloo's ring chunks
          const int64_t c = (o + i) / chunk;
          const int64_t piece_end = std::min(end, (c + 1) * chunk - o);
          reduce_in_ring_order(rows(i * e, piece_end - i, dtype), static_cast<int>(c % n_), op,
                               view(result + i * e, piece_end - i, dtype));
          i = piece_end;
        }
      }
      sync();
      for (int r = 0; r < n_; ++r) {
        std::memcpy(bytes_of(t) + (o + part(r)) * e,
                    segment_.result_slot(r, half()) + part(r) * e, (part(r + 1) - part(r)) * e);
      }
    }
  }

  // acc = x_{c+N-1}; acc = x_{c+k} + acc for k = N-2 .. 0 (gloo_ring_order.h); kAvg divides.
  void reduce_in_ring_order(const at::Tensor& x, int c, ReduceOp op, const at::Tensor& acc) const {
    acc.copy_(x[(c + n_ - 1) % n_]);
    for (int k = n_ - 2; k >= 0; --k) combine(acc, x[(c + k) % n_], op);
    if (op == ReduceOp::kAvg) divide_in_place(acc, n_);
  }

  const int rank_;
  const int n_;
  c10::intrusive_ptr<c10d::Store> store_;  // kept: rank 0 hosts it for the others
  ShmSegment segment_;
  ShmBarrier barrier_;
  uint64_t issued_ = 0;  // collectives submitted (caller's thread)
  // The executor's thread only:
  uint64_t round_ = 0;
  bool first_barrier_ = false;
  ShmOpDescriptor current_;
  std::string broken_;
  std::unique_ptr<SerialExecutor> executor_ = std::make_unique<SerialExecutor>();
};

// The segment of this job: rank 0 creates it, the others open it by the name rank 0 published;
// every rank reports success or its error through the store, so all ranks agree on whether the
// transport exists (if one rank cannot map it, every rank throws ShmUnavailable and they may fall
// back together). A store that fails (a missing rank) is a rendezvous CommError.
ShmSegment join_segment(const RendezvousInfo& info, c10d::Store& store,
                        std::chrono::milliseconds timeout) {
  const std::string prefix = "deepshard/shm/";
  auto put = [&](const std::string& key, const std::string& value) {
    store.set(prefix + key, std::vector<uint8_t>(value.begin(), value.end()));
  };
  auto get = [&](const std::string& key) {
    auto bytes = store.get(prefix + key);
    return std::string(bytes.begin(), bytes.end());
  };
  std::optional<ShmSegment> segment;
  std::string error;
  try {
    try {
      if (info.rank == 0) {
        segment.emplace(ShmSegment::create(std::to_string(info.master_port), info.world_size,
                                           kSlotBytes));
        put("name", segment->name());
      } else {
        store.wait({prefix + "name"}, timeout);
        const std::string name = get("name");
        DS_CHECK(!name.empty(), CommError, "rank 0 could not create the segment");
        segment.emplace(ShmSegment::open(name));
      }
      segment->header().ranks[info.rank].pid.store(::getpid());
    } catch (const CommError& e) {  // the segment, not the store
      error = e.what();
      if (info.rank == 0) put("name", "");
    }
    // Everyone reports, then everyone reads every report.
    put("mapped/" + std::to_string(info.rank), error.empty() ? "ok" : error);
    std::vector<std::string> keys;
    for (int r = 0; r < info.world_size; ++r) {
      keys.push_back(prefix + "mapped/" + std::to_string(r));
    }
    store.wait(keys, timeout);
  } catch (const std::exception& e) {
    throw CommError(detail::concat("rank ", info.rank, " of ", info.world_size,
                                   ": rendezvous at ", info.master_addr, ":", info.master_port,
                                   " (timeout ", timeout.count(),
                                   " ms) failed while setting up shared memory: ",
                                   exception_text(e)));
  }
  if (segment) segment->unlink();  // rank 0: every rank has it mapped (or failed)
  for (int r = 0; r < info.world_size; ++r) {
    std::string report = get("mapped/" + std::to_string(r));
    if (report == "ok") continue;
    throw ShmUnavailable(detail::concat("rank ", info.rank, ": rank ", r,
                                        " could not map the shared-memory segment: ", report));
  }
  return std::move(*segment);
}

}  // namespace

std::unique_ptr<Transport> make_shm_transport(const RendezvousInfo& info,
                                              const c10::intrusive_ptr<c10d::Store>& store,
                                              std::chrono::milliseconds timeout) {
  ShmSegment segment = join_segment(info, *store, timeout);
  return std::make_unique<ShmTransport>(info, store, std::move(segment), timeout);
}

}  // namespace deepshard::comm
