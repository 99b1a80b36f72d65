// Multi-rank scenarios for the comm layer, run by tests/comm/collectives_test.cpp through
// `deepshard launch -n N`. Every rank computes the expected result in closed form (or from the same
// seeded generator) and checks its own output; buffers of ZeRO's shape are padded to a multiple of
// N with logical sizes that are not.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "comm/all_to_all.h"
#include "comm/transport_options.h"
#include "deepshard/util/error.h"
#include "util/stopwatch.h"
#include "workers/worker.h"

namespace deepshard::testing {
namespace {

using comm::ReduceOp;

const int64_t kLogicalSizes[] = {1, 7, 1000003};

int64_t padded(int64_t logical, int n) { return (logical + n - 1) / n * n; }

// Bit-for-bit equality (so NaN patterns and -0.0 count), for any dtype.
bool same_bits(const at::Tensor& a, const at::Tensor& b) {
  if (a.sizes() != b.sizes() || a.scalar_type() != b.scalar_type()) return false;
  auto bytes = [](const at::Tensor& t) { return t.contiguous().view({-1}).view(at::kByte); };
  return at::equal(bytes(a), bytes(b));
}

std::string first_difference(const at::Tensor& got, const at::Tensor& want) {
  at::Tensor diff = (got.to(at::kDouble) != want.to(at::kDouble)).nonzero();
  if (diff.numel() == 0) return "(bit patterns differ)";
  int64_t i = diff[0].item<int64_t>();
  return detail::concat("first difference at ", i, ": got ", got.view({-1})[i].item<double>(),
                        ", want ", want.view({-1})[i].item<double>());
}

#define EXPECT_SAME(got, want, what) \
  DS_WORKER_EXPECT(same_bits(got, want), what << ": " << first_difference(got, want))

// Element i of rank r's input: (r + 1) * (i % 7 + 1). Small integers: exact in every dtype.
at::Tensor ranked_values(int rank, int64_t numel, at::ScalarType dtype) {
  at::Tensor i = at::arange(numel, at::kLong);
  return ((i % 7 + 1) * (rank + 1)).to(dtype);
}

at::Tensor expected_reduction(int n, int64_t numel, at::ScalarType dtype, ReduceOp op) {
  at::Tensor base = at::arange(numel, at::kLong) % 7 + 1;  // the factor of (rank + 1)
  switch (op) {
    case ReduceOp::kSum:
      return (base * (n * (n + 1) / 2)).to(dtype);
    case ReduceOp::kMax:
      return (base * n).to(dtype);
    case ReduceOp::kMin:
      return base.to(dtype);
    case ReduceOp::kAvg:
      if (at::isFloatingType(dtype)) return (base.to(at::kDouble) * (n + 1) / 2).to(dtype);
      return (base * (n * (n + 1) / 2)).div(n, "trunc").to(dtype);
  }
  return {};
}

const char* op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kAvg:
      return "avg";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kMin:
      return "min";
  }
  return "?";
}

DS_WORKER_SCENARIO(all_reduce) {
  const int n = group.size();
  for (auto dtype : {at::kFloat, at::kDouble, at::kHalf, at::kBFloat16, at::kLong}) {
    for (auto op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin}) {
      for (int64_t numel : {int64_t{1}, int64_t{1000}, int64_t{65537}}) {
        at::Tensor t = ranked_values(group.rank(), numel, dtype);
        group.all_reduce(t, op);
        EXPECT_SAME(t, expected_reduction(n, numel, dtype, op),
                    "all_reduce " << op_name(op) << " of " << numel << " " << dtype);
      }
    }
  }
  // A slice of a larger flat buffer (what gradient buckets pass) is reduced in place, alone.
  at::Tensor flat = at::full({30}, 1.0f);
  group.all_reduce(flat.narrow(0, 10, 10));
  DS_WORKER_EXPECT(flat.narrow(0, 10, 10).eq(float(n)).all().item<bool>(), "narrowed slice");
  DS_WORKER_EXPECT(flat.narrow(0, 0, 10).eq(1.0f).all().item<bool>(), "outside the slice");
}

DS_WORKER_SCENARIO(all_gather) {
  const int n = group.size(), r = group.rank();
  auto generator = at::make_generator<at::CPUGeneratorImpl>(1234);  // same stream on every rank
  for (int64_t logical : kLogicalSizes) {
    const int64_t shard = padded(logical, n) / n;
    // fp32 and int64: the full buffer holds its index, zero padding past the logical end.
    for (auto dtype : {at::kFloat, at::kLong}) {
      at::Tensor full = at::zeros({padded(logical, n)}, dtype);
      full.narrow(0, 0, logical).copy_(at::arange(logical, at::kLong));
      at::Tensor out = at::full({padded(logical, n)}, -1, dtype);
      group.all_gather(out, full.narrow(0, r * shard, shard).clone());
      EXPECT_SAME(out, full, "all_gather of " << logical << " " << dtype);
    }
    // bf16: random bit patterns (NaNs, infinities, -0.0, subnormals) must arrive unchanged.
    at::Tensor bits = at::randint(-32768, 32768, {padded(logical, n)}, generator, at::kShort);
    at::Tensor full = bits.view(at::kBFloat16);
    at::Tensor out = at::zeros({padded(logical, n)}, at::kBFloat16);
    group.all_gather(out, full.narrow(0, r * shard, shard).clone());
    EXPECT_SAME(out, full, "bf16 all_gather of " << logical);
  }
}

DS_WORKER_SCENARIO(reduce_scatter) {
  const int n = group.size(), r = group.rank();
  for (int64_t logical : kLogicalSizes) {
    const int64_t total = padded(logical, n), shard = total / n;
    for (auto dtype : {at::kFloat, at::kBFloat16, at::kDouble}) {
      for (auto op : {ReduceOp::kSum, ReduceOp::kAvg}) {
        // Rank r contributes (r + 1) * (i % 7 + 1) for logical i, zero in the padding.
        at::Tensor in = at::zeros({total}, dtype);
        in.narrow(0, 0, logical).copy_(ranked_values(r, logical, dtype));
        at::Tensor want_full = at::zeros({total}, dtype);
        want_full.narrow(0, 0, logical).copy_(expected_reduction(n, logical, dtype, op));
        at::Tensor out = at::full({shard}, -1, dtype);
        group.reduce_scatter(out, in, op);
        EXPECT_SAME(out, want_full.narrow(0, r * shard, shard),
                    "reduce_scatter " << op_name(op) << " of " << logical << " " << dtype);
      }
    }
  }
}

// Slice j of rank r's input encodes (r, j, k); rank r's output slice j must be rank j's slice r.
// int8 (ZeRO++'s quantized gradients), fp32, and bf16 bit patterns; large slices cross several
// shared-memory rounds. The comm log counts each as "all_to_all" with the input's bytes.
DS_WORKER_SCENARIO(all_to_all) {
  const int n = group.size(), r = group.rank();
  auto encoded = [&](int from, int to, int64_t slice, at::ScalarType dtype) {
    at::Tensor k = at::arange(slice, at::kLong);
    at::Tensor v = (k * 13 + from * 7 + to * 3) % 251 - 125;
    if (dtype == at::kBFloat16) return (v * 97 + from).to(at::kShort).view(at::kBFloat16);
    return v.to(dtype);
  };
  int64_t sent_bytes = 0;
  group.log().reset();
  for (int64_t slice : {int64_t(1), int64_t(7), int64_t(3000017)}) {
    for (auto dtype : {at::kChar, at::kFloat, at::kBFloat16}) {
      std::vector<at::Tensor> mine, want;
      for (int j = 0; j < n; ++j) {
        mine.push_back(encoded(r, j, slice, dtype));
        want.push_back(encoded(j, r, slice, dtype));
      }
      at::Tensor in = at::cat(mine), out = at::zeros_like(in);
      comm::all_to_all(group, out, in);
      EXPECT_SAME(out, at::cat(want), "all_to_all of " << n << " x " << slice << " " << dtype);
      sent_bytes += static_cast<int64_t>(in.nbytes());
    }
  }
  const auto ops = group.log().snapshot();
  DS_WORKER_EXPECT(ops.count("all_to_all") == 1 && ops.at("all_to_all").calls == 9 &&
                       ops.at("all_to_all").bytes == sent_bytes,
                   "the comm log's all_to_all");
}

DS_WORKER_SCENARIO(broadcast) {
  const int root = group.size() - 1;  // not rank 0
  for (auto dtype : {at::kFloat, at::kBFloat16, at::kLong}) {
    at::Tensor want = (at::arange(1001, at::kLong) * 3 - 7).to(dtype);
    at::Tensor t = group.rank() == root ? want.clone() : at::zeros({1001}, dtype);
    group.broadcast(t, root);
    EXPECT_SAME(t, want, "broadcast from rank " << root << " of " << dtype);
  }
}

DS_WORKER_SCENARIO(async) {
  const int n = group.size(), r = group.rank();
  const int64_t shard = 50021;
  at::Tensor reduced = ranked_values(r, 100003, at::kFloat);
  at::Tensor shard_in = at::full({shard}, float(r));
  at::Tensor gathered = at::empty({shard * n});
  at::Tensor scatter_in = ranked_values(r, shard * n, at::kBFloat16);
  at::Tensor scatter_out = at::empty({shard}, at::kBFloat16);
  at::Tensor bcast = at::full({777}, double(r));
  at::Tensor reduced_bf16 = ranked_values(r, 4099, at::kBFloat16);

  // Several in flight, waited for in another order than they were started.
  comm::Work w1 = group.all_reduce_async(reduced, ReduceOp::kAvg);
  comm::Work w2 = group.all_gather_async(gathered, shard_in);
  comm::Work w3 = group.reduce_scatter_async(scatter_out, scatter_in, ReduceOp::kSum);
  comm::Work w4 = group.broadcast_async(bcast, n - 1);
  comm::Work w5 = group.all_reduce_async(reduced_bf16, ReduceOp::kMax);
  DS_WORKER_EXPECT(!w1.completed() && !w5.completed(), "completed() before wait()");
  w4.wait();
  w2.wait();
  w5.wait();
  w1.wait();
  w3.wait();
  w3.wait();  // waiting twice is a no-op
  DS_WORKER_EXPECT(w1.completed() && w3.completed(), "completed() after wait()");

  EXPECT_SAME(reduced, expected_reduction(n, 100003, at::kFloat, ReduceOp::kAvg), "async avg");
  at::Tensor want_gathered = at::arange(n, at::kFloat).repeat_interleave(shard);
  EXPECT_SAME(gathered, want_gathered, "async all_gather");
  EXPECT_SAME(
      scatter_out,
      expected_reduction(n, shard * n, at::kBFloat16, ReduceOp::kSum).narrow(0, r * shard, shard),
      "async bf16 reduce_scatter");
  EXPECT_SAME(bcast, at::full({777}, double(n - 1)), "async broadcast");
  EXPECT_SAME(reduced_bf16, expected_reduction(n, 4099, at::kBFloat16, ReduceOp::kMax),
              "async bf16 max");

  // A handle dropped without wait() still completes (its destructor waits).
  at::Tensor dropped = at::ones({10});
  { comm::Work ignored = group.all_reduce_async(dropped); }
  DS_WORKER_EXPECT(dropped.eq(float(n)).all().item<bool>(), "dropped handle completed");
}

DS_WORKER_SCENARIO(comm_log) {
  const int n = group.size();
  group.barrier();
  group.log().reset();
  at::Tensor a = at::ones({100});
  group.all_reduce(a);
  group.all_reduce(a, ReduceOp::kMax);
  at::Tensor bf = at::ones({64}, at::kBFloat16);
  group.all_reduce(bf);
  at::Tensor gathered = at::empty({10 * n}, at::kDouble);
  group.all_gather(gathered, at::ones({10}, at::kDouble));
  at::Tensor scattered = at::empty({8}, at::kHalf);
  group.reduce_scatter(scattered, at::ones({8 * n}, at::kHalf));
  group.broadcast(a, 0);
  group.barrier();

  auto stats = group.log().snapshot();
  auto expect = [&](const std::string& op, int64_t calls, int64_t bytes) {
    DS_WORKER_EXPECT(stats.count(op) == 1, "no entry for " << op);
    DS_WORKER_EXPECT(stats[op].calls == calls, op << " calls " << stats[op].calls);
    DS_WORKER_EXPECT(stats[op].bytes == bytes, op << " bytes " << stats[op].bytes);
    DS_WORKER_EXPECT(stats[op].seconds > 0, op << " seconds " << stats[op].seconds);
    // Blocking forms wait for the whole collective.
    DS_WORKER_EXPECT(stats[op].wait_seconds > 0, op << " wait seconds " << stats[op].wait_seconds);
  };
  expect("all_reduce", 3, 2 * 100 * 4 + 64 * 2);
  expect("all_gather", 1, 10 * 8);
  expect("reduce_scatter", 1, 8 * n * 2);
  expect("broadcast", 1, 100 * 4);
  DS_WORKER_EXPECT(stats["barrier"].calls == 1 && stats["barrier"].bytes == 0, "barrier");
  auto total = group.log().total();
  DS_WORKER_EXPECT(total.calls == 7, "total calls " << total.calls);
  DS_WORKER_EXPECT(total.bytes == 2 * 100 * 4 + 64 * 2 + 80 + 16 * n + 400, "total bytes");
}

// The last rank never joins the all-reduce (it sleeps past the timeout, then leaves): the others
// must get a CommError naming rank, op, size and dtype within the group's timeout.
DS_WORKER_SCENARIO(skip_collective) {
  const auto timeout = std::chrono::milliseconds(worker_timeout_ms());
  if (group.rank() == group.size() - 1) {
    std::this_thread::sleep_for(timeout + std::chrono::seconds(3));
    return;
  }
  at::Tensor t = at::ones({10});
  auto start = std::chrono::steady_clock::now();
  try {
    group.all_reduce(t);
  } catch (const CommError& e) {
    double seconds = util::seconds_since(start);
    std::printf("caught CommError after %.1f s: %s\n", seconds, e.what());
    std::fflush(stdout);
    DS_WORKER_EXPECT(seconds < timeout.count() / 1000.0 + 5, "took " << seconds << " s");
    throw;  // the worker fails, and the launcher names this rank
  }
  throw std::runtime_error("all_reduce without the last rank did not fail");
}

// Rank 1 dies in the middle of the job while the others wait in a collective.
DS_WORKER_SCENARIO(exit_in_collective) {
  if (group.rank() == 1) {
    std::printf("rank 1 exits with status 3\n");
    std::fflush(stdout);
    std::_Exit(3);
  }
  at::Tensor t = at::ones({10});
  group.all_reduce(t);
  group.all_reduce(t);
}

}  // namespace
}  // namespace deepshard::testing

namespace deepshard::testing {
namespace {

// The other transport's group on the next port: "shm" when this group is Gloo, and the reverse.
std::unique_ptr<comm::Group> other_transport_group(comm::Group& group) {
  comm::RendezvousInfo info = group.info();
  info.master_port += 1;
  comm::GroupOptions options;
  options.timeout = std::chrono::milliseconds(worker_timeout_ms());
  options.transport = std::string(comm::transport_name(group)) == "shm" ? comm::TransportKind::kGloo
                                                                        : comm::TransportKind::kShm;
  auto other = comm::create_group(info, options);
  DS_WORKER_EXPECT(std::string(comm::transport_name(*other)) == comm::to_string(options.transport),
                   "got transport " << comm::transport_name(*other));
  return other;
}

// Random data (different on every rank), reduced through both transports: bit-identical results.
// Sizes cross Gloo's 1 MiB segments, its ring chunks and the shm transport's 8 MiB slots.
DS_WORKER_SCENARIO(shm_matches_gloo) {
  auto other = other_transport_group(group);
  const int n = group.size(), r = group.rank();
  auto generator = at::make_generator<at::CPUGeneratorImpl>(100 + r);
  for (int64_t numel : {int64_t{1}, int64_t{1000}, int64_t{65537}, int64_t{2500003}}) {
    for (auto dtype : {at::kFloat, at::kHalf, at::kBFloat16, at::kDouble}) {
      for (auto op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
        at::Tensor x = at::randn({numel}, generator, at::kFloat).mul_(1000).to(dtype);
        at::Tensor a = x.clone(), b = x.clone();
        group.all_reduce(a, op);
        other->all_reduce(b, op);
        EXPECT_SAME(a, b, "all_reduce " << op_name(op) << " of " << numel << " " << dtype);
        if (op == ReduceOp::kMax || numel % n != 0) continue;
        at::Tensor sa = at::empty({numel / n}, dtype), sb = at::empty({numel / n}, dtype);
        group.reduce_scatter(sa, x, op);
        other->reduce_scatter(sb, x, op);
        EXPECT_SAME(sa, sb, "reduce_scatter " << op_name(op) << " of " << numel << " " << dtype);
      }
    }
  }
  // all_gather into the caller's own slice (ZeRO's layout) and broadcast, multi-round sizes.
  const int64_t shard = 3000001;
  at::Tensor full_a = at::randn({shard * n}, generator), full_b = at::empty_like(full_a);
  at::Tensor want = full_a.clone();
  other->broadcast(want, 0);  // every rank agrees on the data
  full_a.copy_(want);
  full_b.copy_(want);
  group.all_gather(full_a, full_a.narrow(0, r * shard, shard));
  other->all_gather(full_b, full_b.narrow(0, r * shard, shard).clone());
  EXPECT_SAME(full_a, want, "in-place all_gather");
  EXPECT_SAME(full_b, want, "all_gather");
  at::Tensor bits =
      at::randint(-32768, 32768, {5000001}, generator, at::kShort).view(at::kBFloat16);
  at::Tensor t = bits.clone();
  group.broadcast(t, n - 1);
  other->broadcast(bits, n - 1);
  EXPECT_SAME(t, bits, "broadcast");
}

// Rank 1 is killed (SIGKILL) while the others wait in a collective. The survivors ignore the
// launcher's SIGTERM, so that they report the transport's own error (naming the dead rank) before
// the launcher's SIGKILL; they print the rendezvous port so the test can look for leftovers.
DS_WORKER_SCENARIO(killed_in_collective) {
  std::printf("port %d transport %s\n", group.info().master_port, comm::transport_name(group));
  std::fflush(stdout);
  group.barrier();
  if (group.rank() == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the others are waiting
    std::raise(SIGKILL);
  }
  std::signal(SIGTERM, SIG_IGN);
  at::Tensor t = at::ones({1 << 20});
  auto start = std::chrono::steady_clock::now();
  try {
    group.all_reduce(t);
  } catch (const CommError& e) {
    double seconds = util::seconds_since(start);
    std::printf("caught CommError after %.1f s: %s\n", seconds, e.what());
    std::fflush(stdout);
    throw;
  }
  throw std::runtime_error("all_reduce with a dead rank did not fail");
}

}  // namespace
}  // namespace deepshard::testing
