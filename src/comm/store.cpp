// The job's rendezvous store: a c10d TCPStore hosted by rank 0 that every rank connects to, shared
// by the transports (Gloo's pairs, the shared-memory segment's name).
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "comm/transport.h"
#include "deepshard/util/error.h"

namespace deepshard::comm {

std::string exception_text(const std::exception& e) {
  if (auto* c10_error = dynamic_cast<const c10::Error*>(&e))
    return c10_error->what_without_backtrace();
  return e.what();
}

c10::intrusive_ptr<c10d::Store> connect_store(const RendezvousInfo& info,
                                              std::chrono::milliseconds timeout) {
  try {
    c10d::TCPStoreOptions options;
    options.port = static_cast<uint16_t>(info.master_port);
    options.isServer = info.rank == 0;
    options.numWorkers = info.world_size;
    options.waitWorkers = true;
    options.timeout = timeout;
    return c10::make_intrusive<c10d::TCPStore>(info.master_addr, options);
  } catch (const std::exception& e) {
    throw CommError(detail::concat(
        "rank ", info.rank, " of ", info.world_size, ": rendezvous at ", info.master_addr, ":",
        info.master_port, " (timeout ", timeout.count(), " ms) failed while ",
        info.rank == 0 ? "hosting the store: " : "connecting to the store: ", exception_text(e)));
  }
}

}  // namespace deepshard::comm
