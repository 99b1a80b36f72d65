// Implementation of StoreClient and JobWatch (see job_store.h).
#include "comm/job_store.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "comm/job_status.h"
#include "deepshard/util/error.h"
#include "util/log.h"

namespace deepshard::comm {
namespace {

using Clock = std::chrono::steady_clock;

int try_connect(const std::string& address, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(address.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return -1;
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) != 0) {
    ::close(fd);
    fd = -1;
  }
  ::freeaddrinfo(found);
  if (fd >= 0) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  return fd;
}

}  // namespace

int connect_to_store(const std::string& address, int port, const std::string& token, int rank,
                     wire::Kind kind, std::chrono::milliseconds timeout) {
  const std::string where = detail::concat("rendezvous store at ", address, ":", port);
  const auto deadline = Clock::now() + timeout;
  int fd = -1;
  for (;;) {
    fd = try_connect(address, port);
    if (fd >= 0) break;
    DS_CHECK(Clock::now() < deadline, CommError, "nothing answers at the ", where, " after ",
             timeout.count(), " ms (is rank 0 running?)");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  auto hello = wire::Writer().op(wire::kHello).str(token).i64(rank).i64(kind);
  auto reply =
      wire::send_message(fd, hello.data()) ? wire::receive_message(fd, 1 << 16) : std::nullopt;
  if (!reply) {
    ::close(fd);
    throw CommError(where + " closed the connection at the hello (not a deepshard store?)");
  }
  wire::Reader r(*reply);
  const wire::Op op = r.op();
  if (op != wire::kOk) {
    ::close(fd);
    throw CommError(op == wire::kRefused ? r.str() : where + ": unexpected answer to the hello");
  }
  return fd;
}

StoreClient::StoreClient(const std::string& address, int port, const std::string& token, int rank,
                         std::chrono::milliseconds timeout)
    : c10d::Store(timeout), where_(detail::concat("rendezvous store at ", address, ":", port)) {
  fd_ = connect_to_store(address, port, token, rank, wire::kData, timeout);
}

StoreClient::~StoreClient() { ::close(fd_); }

wire::Reader StoreClient::call(const wire::Writer& request) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::optional<wire::Bytes> reply;
  if (wire::send_message(fd_, request.data())) reply = wire::receive_message(fd_);
  DS_CHECK(reply.has_value(), CommError, where_, " closed the connection (rank 0 is gone)");
  wire::Reader r(std::move(*reply));
  const wire::Op op = r.op();
  if (op == wire::kOk) return r;
  throw CommError(op == wire::kRefused || op == wire::kTimeout ? r.str()
                                                               : where_ + ": unexpected answer");
}

void StoreClient::set(const std::string& key, const std::vector<uint8_t>& value) {
  call(wire::Writer().op(wire::kSet).str(key).bytes(value));
}

std::vector<uint8_t> StoreClient::compareSet(const std::string& key,
                                             const std::vector<uint8_t>& expected,
                                             const std::vector<uint8_t>& desired) {
  return call(wire::Writer().op(wire::kCompareSet).str(key).bytes(expected).bytes(desired)).bytes();
}

std::vector<uint8_t> StoreClient::get(const std::string& key) {
  return call(wire::Writer().op(wire::kGet).str(key).i64(timeout_.count())).bytes();
}

int64_t StoreClient::add(const std::string& key, int64_t value) {
  return call(wire::Writer().op(wire::kAdd).str(key).i64(value)).i64();
}

bool StoreClient::deleteKey(const std::string& key) {
  return call(wire::Writer().op(wire::kDelete).str(key)).i64() != 0;
}

bool StoreClient::check(const std::vector<std::string>& keys) {
  wire::Writer w;
  w.op(wire::kCheck).i64(int64_t(keys.size()));
  for (const auto& k : keys) w.str(k);
  return call(w).i64() != 0;
}

int64_t StoreClient::getNumKeys() { return call(wire::Writer().op(wire::kNumKeys)).i64(); }

void StoreClient::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void StoreClient::wait(const std::vector<std::string>& keys,
                       const std::chrono::milliseconds& timeout) {
  wire::Writer w;
  w.op(wire::kWait).i64(int64_t(keys.size()));
  for (const auto& k : keys) w.str(k);
  call(w.i64(timeout.count()));
}

JobWatch::JobWatch(const std::string& address, int port, const std::string& token, int rank,
                   std::chrono::milliseconds timeout)
    : where_(detail::concat("rendezvous store at ", address, ":", port)) {
  fd_ = connect_to_store(address, port, token, rank, wire::kWatch, timeout);
  wire::keep_alive(fd_);
  thread_ = std::thread([this] { run(); });
}

JobWatch::~JobWatch() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    leaving_ = true;
  }
  closing_.notify_all();
  ::shutdown(fd_, SHUT_RDWR);
  thread_.join();
  ::close(fd_);
}

void JobWatch::leave() {
  if (leaving_.exchange(true)) return;
  wire::send_message(fd_, wire::Writer().op(wire::kBye).data());
}

void JobWatch::run() {
  auto message = wire::receive_message(fd_, 1 << 16);
  const int error = message ? 0 : errno;
  if (leaving_) return;
  std::string reason;
  if (message) {
    try {
      wire::Reader r(*message);
      if (r.op() == wire::kAbort) reason = r.str();
    } catch (const std::exception&) {
    }
  }
  if (reason.empty() && error == ETIMEDOUT) {
    reason = detail::concat("rank 0 was lost: the ", where_, " it hosts stopped answering for ",
                            wire::kKeepAliveSeconds,
                            " s (the network to rank 0's host was cut, or that host is down)");
  } else if (reason.empty()) {
    reason = "rank 0 was lost: the " + where_ +
             " it hosts closed (rank 0 exited on an error, or was killed)";
  }
  note_job_lost(reason);
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (closing_.wait_for(lock, std::chrono::duration<double>(kGraceSeconds),
                          [&] { return leaving_.load(); })) {
      return;  // this process is ending on its own
    }
  }
  log::error("the job stops: ", reason);
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(kLostRankExitStatus);
}

}  // namespace deepshard::comm
