// The Gloo transport: a ProcessGroupGloo joined through the job's store (store.cpp, wrapped in a
// PrefixStore) whose timeout bounds every operation. Device choice (see
// docs/comm.md): GLOO_SOCKET_IFNAME when set; loopback when every rank is on this node; otherwise
// the local address of the interface that routes to MASTER_ADDR, so that peers on other machines
// can connect (gethostname-based createDefaultDevice silently falls back to loopback when the
// hostname does not resolve, which only fails later as a timeout).
#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include "comm/primitive_transport.h"
#include "deepshard/util/error.h"

namespace deepshard::comm {
namespace {

// The address this host uses to reach `host` (a UDP connect() only picks the route).
std::optional<std::string> local_address_towards(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) {
    return std::nullopt;
  }
  std::optional<std::string> result;
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in local{};
  socklen_t len = sizeof(local);
  char text[INET_ADDRSTRLEN];
  if (fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0 &&
      ::inet_ntop(AF_INET, &local.sin_addr, text, sizeof(text)) != nullptr) {
    result = text;
  }
  if (fd >= 0) ::close(fd);
  ::freeaddrinfo(found);
  return result;
}

std::shared_ptr<::gloo::transport::Device> make_device(const RendezvousInfo& info) {
  using c10d::ProcessGroupGloo;
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME")) {
    return ProcessGroupGloo::createDeviceForInterface(ifname);
  }
  if (info.local_world_size == info.world_size) {
    return ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  }
  if (auto address = local_address_towards(info.master_addr, info.master_port)) {
    return ProcessGroupGloo::createDeviceForHostname(*address);
  }
  return ProcessGroupGloo::createDefaultDevice();
}

class GlooTransport : public PrimitiveTransport {
 public:
  GlooTransport(const RendezvousInfo& info, const c10::intrusive_ptr<c10d::Store>& store,
                std::chrono::milliseconds timeout)
      : PrimitiveTransport(info.world_size) {
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
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg_;
};

}  // namespace

std::unique_ptr<Transport> make_gloo_transport(const RendezvousInfo& info,
                                               const c10::intrusive_ptr<c10d::Store>& store,
                                               std::chrono::milliseconds timeout) {
  return std::make_unique<GlooTransport>(info, store, timeout);
}

}  // namespace deepshard::comm
