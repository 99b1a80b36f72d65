// The framing of deepshard's rendezvous store protocol (job_store.h): a message is a 4-byte
// length and that many bytes; inside, fields are 1-byte op codes, 8-byte integers and
// length-prefixed byte strings. Sockets are blocking; sends never raise SIGPIPE.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace deepshard::comm::wire {

using Bytes = std::vector<uint8_t>;

enum Op : uint8_t {
  kHello = 1,   // token, rank, kind (kData or kWatch)
  kSet,         // key, value
  kGet,         // key, timeout ms: blocks until the key exists
  kAdd,         // key, delta
  kCheck,       // count, keys
  kDelete,      // key
  kNumKeys,     //
  kWait,        // count, keys, timeout ms
  kCompareSet,  // key, expected, desired
  kBye,         // on a watch connection: this rank leaves the job cleanly
  kOk = 100,    // [value]
  kRefused,     // reason (the connection is closed after it)
  kTimeout,     // reason
  kAbort,       // reason (server to every watch connection: the job stops)
};

enum Kind : int64_t { kData = 0, kWatch = 1 };

class Writer {
 public:
  Writer& op(Op o);
  Writer& i64(int64_t v);
  Writer& bytes(const Bytes& b);
  Writer& str(const std::string& s);
  const Bytes& data() const { return data_; }

 private:
  Bytes data_;
};

// Reads fields of one message; every read past the end or of a malformed field throws
// std::runtime_error (a peer speaking another protocol).
class Reader {
 public:
  explicit Reader(Bytes data) : data_(std::move(data)) {}
  Op op();
  int64_t i64();
  Bytes bytes();
  std::string str();

 private:
  void need(size_t n) const;
  Bytes data_;
  size_t pos_ = 0;
};

// TCP keepalive on a connection that stays idle (a watch connection): a peer host that vanishes
// without closing (power, a cut network) ends it with ETIMEDOUT within kKeepAliveSeconds.
constexpr int kKeepAliveSeconds = 15;  // 5 s idle, then 5 unanswered probes 2 s apart
void keep_alive(int fd);

// Sends one message (false when the peer is gone).
bool send_message(int fd, const Bytes& payload);
// Receives one message; nullopt on end of stream or error (errno is then 0 at the end of the
// stream, the socket's error otherwise: ETIMEDOUT when keepalive gave up). Messages above
// `max_size` bytes are errors (nullopt).
std::optional<Bytes> receive_message(int fd, size_t max_size = size_t(1) << 30);

}  // namespace deepshard::comm::wire
