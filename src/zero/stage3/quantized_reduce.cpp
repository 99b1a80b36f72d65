// Implementation of QuantizedReduceScatter, ZeRO++'s quantized gradient reduction (see
// quantized_reduce.h).
#include "zero/stage3/quantized_reduce.h"

#include <ATen/ATen.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "comm/all_to_all.h"
#include "comm/derived_groups.h"
#include "deepshard/util/error.h"
#include "kernels/int8_quantize.h"

namespace deepshard::zero {
namespace {

constexpr int64_t kBlock = QuantizedReduceScatter::kBlock;

int64_t blocks_of(int64_t c) { return kernels::quantize_blocks(c, kBlock); }

// Rows of c elements quantized one by one (each with its own blocks) into one buffer of int8
// values (rows * c) and one of scales (rows * blocks_of(c)): row i is piece i of an all-to-all
// when the rows are ordered by destination.
struct Packed {
  at::Tensor values, scales;
};

Packed quantize_rows(const std::vector<at::Tensor>& rows, int64_t c) {
  const int64_t n = static_cast<int64_t>(rows.size()), b = blocks_of(c);
  const auto options = rows[0].options();
  Packed p{at::empty({n * c}, options.dtype(at::kChar)),
           at::empty({n * b}, options.dtype(at::kFloat))};
  for (int64_t i = 0; i < n; ++i) {
    kernels::Int8Blocks q = kernels::quantize_int8(rows[size_t(i)], kBlock);
    p.values.narrow(0, i * c, c).copy_(q.values);
    p.scales.narrow(0, i * b, b).copy_(q.scales);
  }
  return p;
}

// acc (c fp32 elements) = the sum, in the order given, of the dequantized rows `rows` of `p`.
void sum_rows(const Packed& p, const std::vector<int64_t>& rows, int64_t c, const at::Tensor& acc) {
  const int64_t b = blocks_of(c);
  auto row = [&](int64_t i) {
    return kernels::Int8Blocks{p.values.narrow(0, i * c, c), p.scales.narrow(0, i * b, b), kBlock};
  };
  kernels::dequantize_int8(row(rows[0]), acc);
  if (rows.size() == 1) return;
  at::Tensor term = at::empty_like(acc);
  for (size_t k = 1; k < rows.size(); ++k) {
    kernels::dequantize_int8(row(rows[k]), term);
    acc.add_(term);
  }
}

// One stage: the packed rows sent over a group's all-to-all (values and scales in flight together).
struct Exchange {
  Packed sent, received;
  comm::Work values, scales;

  Exchange(comm::Group& group, Packed rows) : sent(std::move(rows)) {
    received = {at::empty_like(sent.values), at::empty_like(sent.scales)};
    values = comm::all_to_all_async(group, received.values, sent.values);
    scales = comm::all_to_all_async(group, received.scales, sent.scales);
  }
  void wait() {
    values.wait();
    scales.wait();
  }
};

std::vector<int64_t> iota(int64_t n) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(i);
  return v;
}

// The input as something the int8 kernels take: fp32 and bf16 as they are, others in fp32.
at::Tensor quantizable(const at::Tensor& in) {
  const bool as_is = in.scalar_type() == at::kFloat || in.scalar_type() == at::kBFloat16;
  return (as_is ? in : in.to(at::kFloat)).contiguous().view({-1});
}

class OneStage : public QuantizedReduceScatter::Reduction {
 public:
  OneStage(comm::Group& group, const at::Tensor& out, const at::Tensor& in)
      : out_(out.view({-1})),
        n_(group.size()),
        exchange_(group,
                  quantize_rows(quantizable(in).view({n_, out_.numel()}).unbind(0), out_.numel())) {
  }
  void wait() override {
    exchange_.wait();
    sum_rows(exchange_.received, iota(n_), out_.numel(), out_);
    out_.div_(n_);
  }

 private:
  at::Tensor out_;
  int64_t n_;
  Exchange exchange_;
};

class TwoStage : public QuantizedReduceScatter::Reduction {
 public:
  TwoStage(comm::Group& node, comm::Group& cross, const at::Tensor& out, const at::Tensor& in)
      : cross_(cross),
        out_(out.view({-1})),
        per_node_(node.size()),
        nodes_(cross.size()),
        node_stage_(std::in_place, node, quantize_rows(local_rank_major(in), out_.numel())) {}

  void wait() override {
    const int64_t c = out_.numel();
    node_stage_->wait();
    // Row l * K + h of what arrived: local rank l's slice of node h, from this node's rank l.
    at::Tensor partial = at::empty({nodes_ * c}, out_.options());
    std::vector<at::Tensor> partial_rows;
    for (int64_t h = 0; h < nodes_; ++h) {
      std::vector<int64_t> rows;
      for (int64_t l = 0; l < per_node_; ++l) rows.push_back(l * nodes_ + h);
      partial_rows.push_back(partial.narrow(0, h * c, c));
      sum_rows(node_stage_->received, rows, c, partial_rows.back());
    }
    node_stage_.reset();
    Exchange cross_stage(cross_, quantize_rows(partial_rows, c));
    cross_stage.wait();
    sum_rows(cross_stage.received, iota(nodes_), c, out_);
    out_.div_(per_node_ * nodes_);
  }

 private:
  // The slices of `in` ordered by the node's rank that reduces them first: local rank l's
  // slices of every node (slice h * M + l), l-major.
  std::vector<at::Tensor> local_rank_major(const at::Tensor& in) const {
    const std::vector<at::Tensor> slices =
        quantizable(in).view({nodes_ * per_node_, out_.numel()}).unbind(0);
    std::vector<at::Tensor> rows;
    for (int64_t l = 0; l < per_node_; ++l) {
      for (int64_t h = 0; h < nodes_; ++h) rows.push_back(slices[size_t(h * per_node_ + l)]);
    }
    return rows;
  }

  comm::Group& cross_;
  at::Tensor out_;
  int64_t per_node_, nodes_;
  std::optional<Exchange> node_stage_;
};

}  // namespace

QuantizedReduceScatter::QuantizedReduceScatter(comm::Group& group, int ranks_per_node)
    : group_(group) {
  const int n = group.size();
  if (ranks_per_node <= 1 || ranks_per_node >= n || n % ranks_per_node != 0) return;
  per_node_ = ranks_per_node;
  nodes_ = n / ranks_per_node;
  const int node = group.rank() / per_node_, local = group.rank() % per_node_;
  std::vector<int> node_members, cross_members;
  for (int l = 0; l < per_node_; ++l) node_members.push_back(node * per_node_ + l);
  for (int h = 0; h < nodes_; ++h) cross_members.push_back(h * per_node_ + local);
  const comm::GroupOptions options = comm::options_of(group);
  node_ = comm::create_subgroup(group, node_members, "qgz/node/" + std::to_string(node), options);
  cross_ =
      comm::create_subgroup(group, cross_members, "qgz/cross/" + std::to_string(local), options);
  // Their traffic is the engine's: counted with the job's (metrics.jsonl, the comms logger).
  comm::record_into(*node_, group);
  comm::record_into(*cross_, group);
}

QuantizedReduceScatter::~QuantizedReduceScatter() = default;

std::unique_ptr<QuantizedReduceScatter::Reduction> QuantizedReduceScatter::start(
    const at::Tensor& out, const at::Tensor& in) {
  DS_CHECK(out.scalar_type() == at::kFloat && in.numel() == out.numel() * group_.size(), Error,
           "zero_optimization.zero_quantized_gradients: reducing ", in.numel(), " elements over ",
           group_.size(), " ranks into ", out.numel(), " ", c10::toString(out.scalar_type()),
           " elements (needs fp32 and ", group_.size(), " equal slices)");
  if (node_) return std::make_unique<TwoStage>(*node_, *cross_, out, in);
  return std::make_unique<OneStage>(group_, out, in);
}

}  // namespace deepshard::zero
