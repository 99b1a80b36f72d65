// find_free_port: a TCP port that is free on every interface right now, chosen at random BELOW the
// kernel's ephemeral range (/proc/sys/net/ipv4/ip_local_port_range). Ports the kernel hands out for
// port 0 and for outgoing connections all come from the ephemeral range, so a port chosen from it
// can be taken by any concurrent connection (another job's Gloo pairs, a test's client socket)
// between this check and the store's bind: that race made a store fail with EADDRINUSE. Below the
// range only an explicit bind can take the port. Falls back to the kernel's choice when no port
// below the range is free after a few tries.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>

#include "deepshard/util/error.h"
#include "launch/launcher.h"

namespace deepshard::launch {
namespace {

constexpr int kLowestPort = 10000;

// The first port of the kernel's ephemeral range (Linux default 32768).
int ephemeral_range_start() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0, high = 0;
  if (in >> low >> high && low > kLowestPort + 1000) return low;
  return 32768;
}

// Binds `port` (0: the kernel chooses) on every interface, as the store does; returns the bound
// port, or -1 with errno set.
int try_bind(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  DS_CHECK(fd >= 0, Error, "find_free_port: socket: ", std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof(addr);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  const int err = errno;
  ::close(fd);
  errno = err;
  return ok ? ntohs(addr.sin_port) : -1;
}

}  // namespace

int find_free_port() {
  std::random_device entropy;
  std::mt19937 gen(entropy());
  std::uniform_int_distribution<int> pick(kLowestPort, ephemeral_range_start() - 1);
  for (int attempt = 0; attempt < 64; ++attempt) {
    const int port = try_bind(pick(gen));
    if (port > 0) return port;
  }
  const int port = try_bind(0);
  DS_CHECK(port > 0, Error, "find_free_port: cannot bind port 0: ", std::strerror(errno));
  return port;
}

}  // namespace deepshard::launch
