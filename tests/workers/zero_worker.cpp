// Multi-rank scenarios for ZeRO internals that need real ranks, run by tests/train and
// tests/zeropp tests: FetchCheck (every unit gather compared across ranks), and ZeRO++'s quantized
// gradient reduction against the fp32 reduce-scatter.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "workers/worker.h"
#include "zero/stage3/fetch_check.h"
#include "zero/stage3/quantized_reduce.h"

namespace deepshard::testing {
namespace {

// Gathers unit u of 4 (a real all-gather of u-filled slices) under the check.
void checked_gather(zero::FetchCheck& check, comm::Group& group, size_t u) {
  at::Tensor in = at::full({8}, double(u), at::kFloat);
  at::Tensor out = at::empty({8 * group.size()}, at::kFloat);
  check.start(group, u);
  group.all_gather_async(out, in).wait();
  check.finish(u);
}

// args[0]: the gather index at which the last rank fetches another unit ("-1": never). Three
// passes over units 1,2,3,1 (a trace); the departing rank gathers unit 2 instead of the expected
// one. Every rank must fail there with the error naming the gather, both units and the rank.
DS_WORKER_SCENARIO(fetch_check) {
  const int depart_at = std::stoi(args.at(0));
  zero::FetchCheck check({"root", "h.0", "h.1", "h.2"});
  const std::vector<size_t> pass = {1, 2, 3, 1};
  int index = 0;
  try {
    for (int p = 0; p < 3; ++p) {
      for (size_t u : pass) {
        const bool depart = index == depart_at && group.rank() == group.size() - 1;
        checked_gather(check, group, depart ? (u == 2 ? 3 : 2) : u);
        ++index;
      }
    }
  } catch (const std::exception& e) {
    std::printf("rank %d: %s\n", group.rank(), e.what());
    DS_WORKER_EXPECT(depart_at >= 0, "unexpected error");
    const std::string m = e.what();
    DS_WORKER_EXPECT(
        m.find("ZeRO-3: the ranks' unit sequences differ: gather #" + std::to_string(depart_at) +
               " is unit ") != std::string::npos &&
            m.find(" on rank " + std::to_string(group.size() - 1)) != std::string::npos,
        m);
    DS_WORKER_EXPECT(index == depart_at, "failed at gather " << index);
    return;
  }
  DS_WORKER_EXPECT(depart_at < 0, "the departure at gather " << depart_at << " was not caught");
  DS_WORKER_EXPECT(check.gathers() == 12u, check.gathers());
}

// Rank r's gradient buffer of n slices of c elements: heavy-tailed like gradients (normal times a
// log-normal magnitude), the same on every rank that makes it (seeded by r).
at::Tensor gradient_like(int r, int n, int64_t c, at::ScalarType dtype) {
  auto g = at::make_generator<at::CPUGeneratorImpl>(1000 + r);
  at::Tensor x = at::randn({n * c}, g) * at::exp(at::randn({n * c}, g) * 1.5);
  return x.to(dtype);
}

// The absolute maximum of x's block (QuantizedReduceScatter::kBlock values, from x's start)
// holding each element.
at::Tensor block_max(const at::Tensor& x) {
  const int64_t c = x.numel(), block = zero::QuantizedReduceScatter::kBlock;
  const int64_t blocks = (c + block - 1) / block;
  at::Tensor padded = at::zeros({blocks * block}, at::kDouble);
  padded.narrow(0, 0, c).copy_(x.abs());
  return std::get<0>(padded.view({blocks, block}).max(1)).repeat_interleave(block).narrow(0, 0, c);
}

// args[0]: ranks per node (M; M < N and dividing it: the hierarchical reduction, on this host).
// For several slice sizes (one element, across a block boundary, several blocks) and fp32 and bf16
// gradients: the fp32 reduce-scatter (mean) equals the exact mean (fp64) within fp32 rounding, and
// the quantized reduction is within its derived bound of the exact mean at every element:
// (S/N) * sum over ranks of m_r / 128, S = 1 stage or 2 (hierarchical), m_r the absolute maximum of
// rank r's quantization block holding the element (quantized_reduce.h), plus fp32 rounding. The
// comm log counts the all-to-alls' int8 values and fp32 scales, the bytes they really are.
DS_WORKER_SCENARIO(quantized_reduce) {
  const int n = group.size(), me = group.rank(), per_node = std::stoi(args.at(0));
  zero::QuantizedReduceScatter quantized(group, per_node);
  const bool two_stage = per_node > 1 && per_node < n && n % per_node == 0;
  DS_WORKER_EXPECT(quantized.hierarchical() == two_stage, "hierarchical " << two_stage);
  const int stages = two_stage ? 2 : 1;
  int64_t expected_bytes = 0;
  double worst = 0;
  group.log().reset();
  for (int64_t c : {int64_t(1), int64_t(4097), int64_t(20011)}) {
    for (auto dtype : {at::kFloat, at::kBFloat16}) {
      at::Tensor exact = at::zeros({c}, at::kDouble), bound = at::zeros({c}, at::kDouble);
      for (int r = 0; r < n; ++r) {
        at::Tensor mine = gradient_like(r, n, c, dtype).to(at::kDouble).narrow(0, me * c, c);
        exact += mine / n;
        bound += block_max(mine) * (double(stages) / n / 128);
      }
      const at::Tensor in = gradient_like(me, n, c, dtype);
      at::Tensor reference = at::empty({c}, at::kFloat);
      group.reduce_scatter(reference, in.to(at::kFloat), comm::ReduceOp::kAvg);
      const double rs_error = (reference.to(at::kDouble) - exact).abs().max().item<double>();
      DS_WORKER_EXPECT(rs_error <= 1e-5 * exact.abs().max().item<double>() + 1e-30,
                       "the fp32 reduce-scatter is off the exact mean by " << rs_error);
      at::Tensor out = at::full({c}, -1.0f, at::kFloat);
      quantized.start(out, in)->wait();
      const at::Tensor error = (out.to(at::kDouble) - exact).abs();
      // fp32 rounding of the sums: a few ulps of the magnitudes summed.
      const at::Tensor slack = bound * 1e-4 + 1e-6 * exact.abs();
      const at::Tensor excess = error - bound - slack;
      const int64_t worst_i = excess.argmax().item<int64_t>();
      DS_WORKER_EXPECT(excess[worst_i].item<double>() <= 0,
                       "c " << c << " " << dtype << ": element " << worst_i << " off by "
                            << error[worst_i].item<double>() << ", bound "
                            << bound[worst_i].item<double>());
      if (c > 1) DS_WORKER_EXPECT(error.max().item<double>() > 0, "nothing was quantized");
      worst = std::max(worst, (error / (bound + 1e-30)).max().item<double>());
      const int64_t nodes = two_stage ? n / per_node : n;
      expected_bytes += zero::QuantizedReduceScatter::wire_bytes(n, c);
      if (two_stage) expected_bytes += zero::QuantizedReduceScatter::wire_bytes(nodes, c);
    }
  }
  const auto ops = group.log().snapshot();
  DS_WORKER_EXPECT(ops.count("all_to_all") == 1 && ops.at("all_to_all").bytes == expected_bytes,
                   "all_to_all bytes " << (ops.count("all_to_all") ? ops.at("all_to_all").bytes : 0)
                                       << ", expected " << expected_bytes);
  std::printf("rank %d: quantized reduction within %.3f of its bound (%s, %d ranks)\n", me, worst,
              two_stage ? "hierarchical" : "one stage", n);
}

}  // namespace
}  // namespace deepshard::testing
