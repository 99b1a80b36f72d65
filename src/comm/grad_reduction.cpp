// Implementation of GradReduction: the cast to the wire dtype and the pre-scaling happen before the
// collective is issued, the post-scaling and the cast back in complete_next().
#include "comm/grad_reduction.h"

#include <ATen/ATen.h>

#include "deepshard/util/error.h"

namespace deepshard::comm {

GradReduction::GradReduction(Group& group, GradReductionOptions options)
    : group_(group), options_(options) {
  DS_CHECK(options_.predivide_factor > 0, Error, "gradient_predivide_factor must be > 0, got ",
           options_.predivide_factor);
}

bool GradReduction::plain() const {
  return !options_.wire_dtype && options_.predivide_factor == 1.0 && !options_.prescale;
}

Work GradReduction::all_reduce_mean_async(const at::Tensor& grads) {
  const at::ScalarType wire_dtype = options_.wire_dtype.value_or(grads.scalar_type());
  const double f = options_.predivide_factor;
  const double n = group_.size();
  if (wire_dtype == grads.scalar_type() && f == 1.0 && !options_.prescale) {
    pending_.emplace_back(nullptr);
    return group_.all_reduce_async(grads, ReduceOp::kAvg);
  }
  const bool cast = wire_dtype != grads.scalar_type();
  at::Tensor wire = cast ? grads.to(wire_dtype) : grads;
  ReduceOp op = ReduceOp::kSum;
  double after = 1.0;  // factor applied after the sum
  if (options_.prescale) {
    wire.div_(n);
  } else if (f != 1.0) {
    wire.mul_(1.0 / f);
    after = f / n;
  } else {
    op = ReduceOp::kAvg;
  }
  Work work = group_.all_reduce_async(wire, op);
  pending_.emplace_back([grads, wire, after, cast] {
    if (after != 1.0) wire.mul_(after);
    if (cast) grads.copy_(wire);
  });
  return work;
}

void GradReduction::complete_next() {
  DS_ASSERT(!pending_.empty(), "GradReduction::complete_next without a started reduction");
  std::function<void()> finish = std::move(pending_.front());
  pending_.pop_front();
  if (finish) finish();
}

Work GradReduction::reduce_scatter_mean_async(const at::Tensor& out, const at::Tensor& in) {
  DS_CHECK(options_.predivide_factor == 1.0 && !options_.prescale, Error,
           "gradient_predivide_factor != 1 and prescale_gradients need an all-reduce; DeepSpeed "
           "does not support them with reduce-scatter");
  const at::ScalarType wire_dtype = options_.wire_dtype.value_or(in.scalar_type());
  const at::Tensor wire_in = in.scalar_type() == wire_dtype ? in : in.to(wire_dtype);
  if (wire_in.is_same(in) && out.scalar_type() == wire_dtype) {
    pending_.emplace_back(nullptr);
    return group_.reduce_scatter_async(out, in, ReduceOp::kAvg);
  }
  if (out.scalar_type() == wire_dtype) {
    Work work = group_.reduce_scatter_async(out, wire_in, ReduceOp::kAvg);
    pending_.emplace_back([wire_in] {});  // keeps the cast input alive until the transfer is done
    return work;
  }
  at::Tensor wire_out = at::empty({out.numel()}, out.options().dtype(wire_dtype));
  Work work = group_.reduce_scatter_async(wire_out, wire_in, ReduceOp::kAvg);
  pending_.emplace_back([out, wire_in, wire_out] { out.view({-1}).copy_(wire_out); });
  return work;
}

}  // namespace deepshard::comm
