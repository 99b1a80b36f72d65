// StoreServer: the job's rendezvous store, hosted by rank 0 (deepshard's replacement for c10d's
// TCPStore, which always listens on every interface and lets anyone in). It
//  - listens on the address the job was told (MASTER_ADDR: loopback for a one-node job), not on
//    every interface;
//  - admits only connections presenting the job token (job_token.h): any other process gets a
//    "refused" answer naming the reason, and the job goes on;
//  - holds the keys of the rendezvous (set/get/add/wait..., for ProcessGroupGloo);
//  - keeps one watch connection per rank: a rank whose watch connection ends without a "bye"
//    (the process died, was killed or failed) is lost, and every other rank is told at once
//    (kAbort naming the lost rank), which stops the job within a second, launcher or not.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/store_wire.h"

namespace deepshard::comm {

class StoreServer {
 public:
  // Binds `address`:`port` (IPv4 or a host name) and starts serving. Throws CommError naming the
  // address and port when it cannot (a port already taken, an address not on this host).
  StoreServer(const std::string& address, int port, std::string token, int world_size);
  ~StoreServer();  // closes every connection and joins every thread

  // Waits until every rank that opened a watch connection has left (bye) or was lost, or until
  // `timeout`: rank 0 keeps the store up while the others finish.
  void wait_until_everyone_left(std::chrono::milliseconds timeout);

 private:
  struct Connection {
    int fd = -1;
    int rank = -1;
    std::string peer;  // the address it came from
    bool watch = false;
    bool left = false;  // said bye
    std::mutex write_mutex;
  };
  void accept_loop();
  void serve(std::shared_ptr<Connection> c);
  void serve_data(Connection& c);
  void serve_watch(Connection& c);
  void lost(int rank, const std::string& why);
  wire::Bytes handle(wire::Reader& request);
  bool wait_for_keys(std::unique_lock<std::mutex>& lock, const std::vector<std::string>& keys,
                     std::chrono::milliseconds timeout);

  std::string token_;
  int world_size_;
  std::string where_;
  int listen_fd_ = -1;
  bool stopping_ = false;  // under mutex_
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, wire::Bytes> data_;
  std::vector<std::shared_ptr<Connection>> connections_;
  std::vector<std::thread> threads_;
  std::map<int, std::shared_ptr<Connection>> watches_;  // by rank, while open
  int watches_ended_ = 0;
  std::string abort_reason_;
  std::thread acceptor_;
};

}  // namespace deepshard::comm
