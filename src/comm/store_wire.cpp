// Implementation of the store protocol's framing (see store_wire.h).
#include "comm/store_wire.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace deepshard::comm::wire {
namespace {

bool send_all(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    ssize_t sent = ::send(fd, p, n, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) return false;
    p += sent;
    n -= size_t(sent);
  }
  return true;
}

bool receive_all(int fd, uint8_t* p, size_t n) {
  while (n > 0) {
    ssize_t got = ::recv(fd, p, n, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got == 0) errno = 0;
    if (got <= 0) return false;
    p += got;
    n -= size_t(got);
  }
  return true;
}

}  // namespace

Writer& Writer::op(Op o) {
  data_.push_back(o);
  return *this;
}

Writer& Writer::i64(int64_t v) {
  uint8_t b[8];
  std::memcpy(b, &v, 8);
  data_.insert(data_.end(), b, b + 8);
  return *this;
}

Writer& Writer::bytes(const Bytes& b) {
  i64(int64_t(b.size()));
  data_.insert(data_.end(), b.begin(), b.end());
  return *this;
}

Writer& Writer::str(const std::string& s) { return bytes(Bytes(s.begin(), s.end())); }

void Reader::need(size_t n) const {
  if (n > data_.size() - pos_) throw std::runtime_error("store protocol: truncated message");
}

Op Reader::op() {
  need(1);
  return Op(data_[pos_++]);
}

int64_t Reader::i64() {
  need(8);
  int64_t v;
  std::memcpy(&v, data_.data() + pos_, 8);
  pos_ += 8;
  return v;
}

Bytes Reader::bytes() {
  const int64_t n = i64();
  if (n < 0) throw std::runtime_error("store protocol: negative length");
  need(size_t(n));
  Bytes b(data_.begin() + std::ptrdiff_t(pos_), data_.begin() + std::ptrdiff_t(pos_ + size_t(n)));
  pos_ += size_t(n);
  return b;
}

std::string Reader::str() {
  Bytes b = bytes();
  return std::string(b.begin(), b.end());
}

void keep_alive(int fd) {
  int one = 1, idle = 5, interval = 2, count = 5;
  static_assert(kKeepAliveSeconds == 5 + 2 * 5);
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
}

bool send_message(int fd, const Bytes& payload) {
  uint32_t n = uint32_t(payload.size());
  uint8_t header[4];
  std::memcpy(header, &n, 4);
  return send_all(fd, header, 4) && send_all(fd, payload.data(), payload.size());
}

std::optional<Bytes> receive_message(int fd, size_t max_size) {
  uint8_t header[4];
  if (!receive_all(fd, header, 4)) return std::nullopt;
  uint32_t n;
  std::memcpy(&n, header, 4);
  if (n > max_size) {
    errno = EMSGSIZE;
    return std::nullopt;
  }
  Bytes payload(n);
  if (!receive_all(fd, payload.data(), n)) return std::nullopt;
  return payload;
}

}  // namespace deepshard::comm::wire
