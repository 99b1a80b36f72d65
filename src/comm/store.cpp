// The job's rendezvous store: deepshard's own store (store_server.h) hosted by rank 0, which every
// rank joins with a client connection and a watch connection (job_store.h); shared by the
// transports (Gloo's pairs, the shared-memory segment's name).
#include <exception>

#include "comm/job_store.h"
#include "comm/store_server.h"
#include "comm/transport.h"
#include "deepshard/util/error.h"

namespace deepshard::comm {

std::string exception_text(const std::exception& e) {
  if (auto* c10_error = dynamic_cast<const c10::Error*>(&e))
    return c10_error->what_without_backtrace();
  return e.what();
}

JobStore::JobStore(const RendezvousInfo& info, std::chrono::milliseconds timeout)
    : timeout_(timeout) {
  if (info.rank == 0) {
    server_ = std::make_unique<StoreServer>(info.master_addr, info.master_port, info.job_token,
                                            info.world_size);
  }
  store_ = c10::make_intrusive<StoreClient>(info.master_addr, info.master_port, info.job_token,
                                            info.rank, timeout);
  watch_ = std::make_unique<JobWatch>(info.master_addr, info.master_port, info.job_token, info.rank,
                                      timeout);
}

JobStore::~JobStore() {
  // A clean end (no exception on its way): this rank leaves, and rank 0 keeps the store up until
  // the others have left too. Otherwise the watch just closes: the others are told that this rank
  // was lost.
  if (std::uncaught_exceptions() == 0) {
    watch_->leave();
    if (server_) server_->wait_until_everyone_left(timeout_);
  }
  watch_.reset();
  store_.reset();
  server_.reset();
}

std::unique_ptr<JobStore> connect_store(const RendezvousInfo& info,
                                        std::chrono::milliseconds timeout) {
  try {
    return std::make_unique<JobStore>(info, timeout);
  } catch (const std::exception& e) {
    throw CommError(detail::concat(
        "rank ", info.rank, " of ", info.world_size, ": rendezvous at ", info.master_addr, ":",
        info.master_port, " (timeout ", timeout.count(), " ms) failed while ",
        info.rank == 0 ? "hosting the store: " : "connecting to the store: ", exception_text(e)));
  }
}

}  // namespace deepshard::comm
