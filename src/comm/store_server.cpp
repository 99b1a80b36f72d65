// Implementation of StoreServer (see store_server.h): one thread accepts, one thread serves each
// connection (a job has a few per rank).
#include "comm/store_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "deepshard/util/error.h"
#include "util/log.h"

namespace deepshard::comm {
namespace {

sockaddr_in resolve(const std::string& address, int port, const std::string& where) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  int rc = ::getaddrinfo(address.c_str(), nullptr, &hints, &found);
  DS_CHECK(rc == 0 && found != nullptr, CommError, where, ": cannot resolve '", address,
           "': ", ::gai_strerror(rc));
  sockaddr_in a{};
  std::memcpy(&a, found->ai_addr, sizeof(a));
  ::freeaddrinfo(found);
  a.sin_port = htons(uint16_t(port));
  return a;
}

}  // namespace

StoreServer::StoreServer(const std::string& address, int port, std::string token, int world_size)
    : token_(std::move(token)), world_size_(world_size) {
  where_ = detail::concat("rendezvous store at ", address, ":", port);
  const sockaddr_in a = resolve(address, port, where_);
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  DS_CHECK(listen_fd_ >= 0, CommError, where_, ": socket(): ", std::strerror(errno));
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(listen_fd_, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0 ||
      ::listen(listen_fd_, 128) != 0) {
    const int e = errno;
    ::close(listen_fd_);
    throw CommError(detail::concat(
        where_, ": cannot listen: ", std::strerror(e),
        e == EADDRINUSE      ? " (the port is taken, by another job or another program: choose "
                               "another MASTER_PORT / --master-port)"
        : e == EADDRNOTAVAIL ? " (the address is not one of this host's: MASTER_ADDR must be "
                               "the address of rank 0's host)"
                             : ""));
  }
  acceptor_ = std::thread([this] { accept_loop(); });
}

StoreServer::~StoreServer() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    for (auto& c : connections_) ::shutdown(c->fd, SHUT_RDWR);
  }
  changed_.notify_all();
  acceptor_.join();
  for (auto& t : threads_) t.join();
  for (auto& c : connections_) ::close(c->fd);
  ::close(listen_fd_);
}

void StoreServer::accept_loop() {
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) return;
    }
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    sockaddr_in from{};
    socklen_t from_len = sizeof(from);
    int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&from), &from_len, SOCK_CLOEXEC);
    if (fd < 0) continue;
    auto c = std::make_shared<Connection>();
    c->fd = fd;
    char text[INET_ADDRSTRLEN] = "?";
    ::inet_ntop(AF_INET, &from.sin_addr, text, sizeof(text));
    c->peer = text;
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) {
      ::close(fd);
      return;
    }
    connections_.push_back(c);
    threads_.emplace_back([this, c] { serve(c); });
  }
}

void StoreServer::serve(std::shared_ptr<Connection> c) {
  // The hello: the job token, the rank and what the connection is for.
  auto hello = wire::receive_message(c->fd, 1 << 16);
  if (!hello) return;
  std::string refusal;
  try {
    wire::Reader r(*hello);
    if (r.op() != wire::kHello) throw std::runtime_error("no hello");
    const std::string token = r.str();
    c->rank = int(r.i64());
    c->watch = r.i64() == wire::kWatch;
    if (token != token_) {
      refusal = detail::concat(
          where_, " refused rank ", c->rank,
          ": its job token differs from this job's (a process of another job, or one started "
          "without this job's DEEPSHARD_JOB_TOKEN)");
    } else if (c->rank < 0 || c->rank >= world_size_) {
      refusal = detail::concat(where_, " refused rank ", c->rank, ": the job has ", world_size_,
                               " ranks");
    }
  } catch (const std::exception& e) {
    refusal = where_ + " refused a connection that does not speak deepshard's store protocol";
  }
  if (refusal.empty() && c->watch) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (watches_.count(c->rank) != 0) {
      refusal = detail::concat(where_, " refused rank ", c->rank, ": rank ", c->rank,
                               " has already joined this job");
    } else if (!abort_reason_.empty()) {
      refusal = where_ + ": the job is stopping: " + abort_reason_;
    } else {
      watches_[c->rank] = c;
    }
  }
  if (!refusal.empty()) {
    log::warn(refusal);
    wire::send_message(c->fd, wire::Writer().op(wire::kRefused).str(refusal).data());
    ::shutdown(c->fd, SHUT_RDWR);
    return;
  }
  {
    std::lock_guard<std::mutex> w(c->write_mutex);
    wire::send_message(c->fd, wire::Writer().op(wire::kOk).data());
  }
  if (c->watch) {
    serve_watch(*c);
  } else {
    serve_data(*c);
  }
}

void StoreServer::serve_watch(Connection& c) {
  // Nothing but a bye comes on a watch connection; its end without one is the rank's loss, and
  // keepalive ends it when the rank's host stops answering (a cut network).
  wire::keep_alive(c.fd);
  int error = 0;
  for (;;) {
    auto message = wire::receive_message(c.fd, 1 << 16);
    error = message ? 0 : errno;
    if (message && !message->empty() && (*message)[0] == wire::kBye) {
      std::lock_guard<std::mutex> lock(mutex_);
      c.left = true;
      ++watches_ended_;
      changed_.notify_all();
      return;
    }
    if (!message) break;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++watches_ended_;
    changed_.notify_all();
    if (stopping_) return;
  }
  if (error == ETIMEDOUT) {
    lost(c.rank,
         detail::concat("its host (", c.peer, ") stopped answering the rendezvous store for ",
                        wire::kKeepAliveSeconds,
                        " s (the network to it was cut, or the host is down)"));
  } else {
    lost(c.rank, detail::concat("its connection to the rendezvous store (from ", c.peer,
                                ") closed without leaving the job (the process exited on an "
                                "error, or was killed)"));
  }
}

void StoreServer::lost(int rank, const std::string& why) {
  std::vector<std::shared_ptr<Connection>> others;
  std::string reason;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!abort_reason_.empty()) return;  // the first loss is the one reported
    abort_reason_ = detail::concat("rank ", rank, " was lost: ", why);
    reason = abort_reason_;
    for (auto& [r, c] : watches_) {
      if (r != rank && !c->left) others.push_back(c);
    }
  }
  // Rank 0 (this process) is told last, so that the others hear it before its store goes away.
  std::stable_partition(others.begin(), others.end(), [](const auto& c) { return c->rank != 0; });
  for (auto& c : others) {
    std::lock_guard<std::mutex> w(c->write_mutex);
    wire::send_message(c->fd, wire::Writer().op(wire::kAbort).str(reason).data());
  }
}

void StoreServer::serve_data(Connection& c) {
  for (;;) {
    auto message = wire::receive_message(c.fd);
    if (!message) return;
    wire::Bytes reply;
    try {
      wire::Reader r(std::move(*message));
      reply = handle(r);
    } catch (const std::exception& e) {
      reply = wire::Writer().op(wire::kRefused).str(where_ + ": bad request: " + e.what()).data();
    }
    std::lock_guard<std::mutex> w(c.write_mutex);
    if (!wire::send_message(c.fd, reply)) return;
  }
}

bool StoreServer::wait_for_keys(std::unique_lock<std::mutex>& lock,
                                const std::vector<std::string>& keys,
                                std::chrono::milliseconds timeout) {
  auto all_there = [&] {
    if (stopping_) return true;
    for (const auto& k : keys) {
      if (data_.count(k) == 0) return false;
    }
    return true;
  };
  if (timeout.count() <= 0) {
    changed_.wait(lock, all_there);
  } else {
    changed_.wait_for(lock, timeout, all_there);
  }
  if (stopping_) return false;
  for (const auto& k : keys) {
    if (data_.count(k) == 0) return false;
  }
  return true;
}

wire::Bytes StoreServer::handle(wire::Reader& r) {
  using wire::Writer;
  const wire::Op op = r.op();
  std::unique_lock<std::mutex> lock(mutex_);
  auto timeout_reply = [&](const std::vector<std::string>& keys) {
    std::string list;
    for (const auto& k : keys) list += (list.empty() ? "" : ", ") + k;
    return Writer()
        .op(wire::kTimeout)
        .str(where_ + ": timed out waiting for key(s) " + list)
        .data();
  };
  switch (op) {
    case wire::kSet: {
      std::string key = r.str();
      data_[key] = r.bytes();
      changed_.notify_all();
      return Writer().op(wire::kOk).data();
    }
    case wire::kGet: {
      std::string key = r.str();
      auto timeout = std::chrono::milliseconds(r.i64());
      if (!wait_for_keys(lock, {key}, timeout)) return timeout_reply({key});
      return Writer().op(wire::kOk).bytes(data_[key]).data();
    }
    case wire::kAdd: {
      std::string key = r.str();
      const int64_t delta = r.i64();
      int64_t value = 0;
      auto it = data_.find(key);
      if (it != data_.end()) value = std::stoll(std::string(it->second.begin(), it->second.end()));
      value += delta;
      const std::string text = std::to_string(value);
      data_[key] = wire::Bytes(text.begin(), text.end());
      changed_.notify_all();
      return Writer().op(wire::kOk).i64(value).data();
    }
    case wire::kCheck:
    case wire::kWait: {
      const int64_t n = r.i64();
      if (n < 0 || n > 1 << 20) throw std::runtime_error("bad key count");
      std::vector<std::string> keys;
      for (int64_t i = 0; i < n; ++i) keys.push_back(r.str());
      if (op == wire::kCheck) {
        bool all = true;
        for (const auto& k : keys) all = all && data_.count(k) != 0;
        return Writer().op(wire::kOk).i64(all ? 1 : 0).data();
      }
      auto timeout = std::chrono::milliseconds(r.i64());
      if (!wait_for_keys(lock, keys, timeout)) return timeout_reply(keys);
      return Writer().op(wire::kOk).data();
    }
    case wire::kDelete: {
      const bool erased = data_.erase(r.str()) != 0;
      changed_.notify_all();
      return Writer().op(wire::kOk).i64(erased ? 1 : 0).data();
    }
    case wire::kNumKeys:
      return Writer().op(wire::kOk).i64(int64_t(data_.size())).data();
    case wire::kCompareSet: {
      std::string key = r.str();
      wire::Bytes expected = r.bytes(), desired = r.bytes();
      auto it = data_.find(key);
      if (it == data_.end()) {
        if (!expected.empty()) return Writer().op(wire::kOk).bytes(expected).data();
        data_[key] = desired;
        changed_.notify_all();
        return Writer().op(wire::kOk).bytes(desired).data();
      }
      if (it->second == expected) {
        it->second = desired;
        changed_.notify_all();
      }
      return Writer().op(wire::kOk).bytes(it->second).data();
    }
    default:
      throw std::runtime_error(detail::concat("unknown operation ", int(op)));
  }
}

void StoreServer::wait_until_everyone_left(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait_for(lock, timeout,
                    [&] { return watches_ended_ >= int(watches_.size()) || stopping_; });
}

}  // namespace deepshard::comm
