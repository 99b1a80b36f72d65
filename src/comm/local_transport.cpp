// The transport of a one-rank world: nothing to exchange, so every operation completes at issue.
#include "comm/primitive_transport.h"

namespace deepshard::comm {
namespace {

class LocalTransport : public PrimitiveTransport {
 public:
  LocalTransport() : PrimitiveTransport(1) {}
  const char* name() const override { return "local"; }
  Handle barrier() override { return {}; }

 protected:
  Handle allreduce_primitive(at::Tensor, c10d::ReduceOp) override { return {}; }
  Handle alltoall_primitive(at::Tensor out, at::Tensor in) override {
    out.copy_(in);
    return {};
  }
  Handle broadcast_primitive(at::Tensor, int) override { return {}; }
};

}  // namespace

std::unique_ptr<Transport> make_local_transport() { return std::make_unique<LocalTransport>(); }

}  // namespace deepshard::comm
