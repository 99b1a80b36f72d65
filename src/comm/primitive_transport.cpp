// Implementation of PrimitiveTransport: the compositions described in primitive_transport.h. The
// scratch leases are captured by the post-processing so that they outlive the transfer.
#include "comm/primitive_transport.h"

#include <ATen/ATen.h>

#include "comm/local_reduce.h"

namespace deepshard::comm {
namespace {

// What goes on the wire: a flat view, bf16 as the fp16 view of the same bits.
at::Tensor wire_view(const at::Tensor& t) {
  at::Tensor flat = t.view({-1});
  return t.scalar_type() == at::kBFloat16 ? flat.view(at::kHalf) : flat;
}

c10d::ReduceOp primitive_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return c10d::ReduceOp::SUM;
    case ReduceOp::kMax:
      return c10d::ReduceOp::MAX;
    case ReduceOp::kMin:
      return c10d::ReduceOp::MIN;
  }
  return c10d::ReduceOp::SUM;
}

}  // namespace

PrimitiveTransport::Replicated PrimitiveTransport::replicated(const at::Tensor& t) {
  const int n = world_size_;
  if (n == 1) return {t, nullptr};
  auto lease = scratch_.acquire(t.numel() * n, t.options());
  lease->tensor().view({n, t.numel()}).copy_(t.reshape({1, -1}).expand({n, t.numel()}));
  return {lease->tensor(), lease};
}

Transport::Started PrimitiveTransport::all_reduce(const at::Tensor& tensor, ReduceOp op) {
  const int n = world_size_;
  const int64_t numel = tensor.numel();
  if (tensor.scalar_type() == at::kBFloat16 && n > 1) {
    auto gathered = scratch_.acquire(n * numel, tensor.options());
    auto sent = replicated(tensor);
    Handle handle = alltoall_primitive(wire_view(gathered->tensor()), wire_view(sent.tensor));
    return {handle, [=, sent = sent] {  // `sent` must outlive the transfer
              reduce_slices(gathered->tensor().view({n, numel}), op, tensor);
            }};
  }
  Handle handle = allreduce_primitive(tensor.view({-1}), primitive_op(op));
  if (op != ReduceOp::kAvg) return {handle, nullptr};
  return {handle, [=] { divide_in_place(tensor, n); }};
}

Transport::Started PrimitiveTransport::all_gather(const at::Tensor& out, const at::Tensor& in) {
  auto sent = replicated(in);
  Handle handle = alltoall_primitive(wire_view(out), wire_view(sent.tensor));
  return {handle, [sent] {}};  // holds the scratch until the transfer is done
}

Transport::Started PrimitiveTransport::reduce_scatter(const at::Tensor& out, const at::Tensor& in,
                                                      ReduceOp op) {
  const int n = world_size_;
  auto received = scratch_.acquire(in.numel(), in.options());
  Handle handle = alltoall_primitive(wire_view(received->tensor()), wire_view(in));
  return {handle, [=] { reduce_slices(received->tensor().view({n, out.numel()}), op, out); }};
}

Transport::Started PrimitiveTransport::all_to_all(const at::Tensor& out, const at::Tensor& in) {
  return {alltoall_primitive(wire_view(out), wire_view(in)), nullptr};
}

Transport::Started PrimitiveTransport::broadcast(const at::Tensor& tensor, int root) {
  return {broadcast_primitive(wire_view(tensor), root), nullptr};
}

}  // namespace deepshard::comm
