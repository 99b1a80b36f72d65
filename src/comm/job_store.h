// The client side of the job's rendezvous store (store_server.h):
//  - StoreClient: a c10d::Store over one connection, for ProcessGroupGloo's rendezvous;
//  - JobWatch: this rank's watch connection and the thread that waits on it. When the server
//    says another rank was lost, or the server itself (rank 0) is gone, the watch gives this
//    process kGraceSeconds to fail on its own (its own error message is the better one: ranks
//    that hit the same error fail together), then logs an error naming the lost rank and ends the
//    process with exit status kLostRankExitStatus: the main thread may be blocked in a collective
//    that would otherwise wait for the group's timeout. leave() ends the watch cleanly.
// Both present the job token in their hello; a refusal is a CommError carrying the server's
// reason.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "comm/store_wire.h"

namespace deepshard::comm {

constexpr int kLostRankExitStatus = 75;
constexpr double kGraceSeconds = 2.0;

// Connects to address:port (retrying until `timeout`) and says hello; returns the socket.
// Throws CommError when nothing answers in time or the server refuses.
int connect_to_store(const std::string& address, int port, const std::string& token, int rank,
                     wire::Kind kind, std::chrono::milliseconds timeout);

class StoreClient : public c10d::Store {
 public:
  StoreClient(const std::string& address, int port, const std::string& token, int rank,
              std::chrono::milliseconds timeout);
  ~StoreClient() override;

  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                  const std::vector<uint8_t>& desired) override;
  std::vector<uint8_t> get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t value) override;
  bool deleteKey(const std::string& key) override;
  bool check(const std::vector<std::string>& keys) override;
  int64_t getNumKeys() override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  wire::Reader call(const wire::Writer& request);
  std::string where_;
  int fd_ = -1;
  std::mutex mutex_;
};

class JobWatch {
 public:
  JobWatch(const std::string& address, int port, const std::string& token, int rank,
           std::chrono::milliseconds timeout);
  // Without leave(): the connection just closes, and the server reports this rank lost.
  ~JobWatch();
  // This rank is done: says bye (the others go on without treating it as lost).
  void leave();

 private:
  void run();
  std::string where_;
  int fd_ = -1;
  std::atomic<bool> leaving_{false};
  std::mutex mutex_;
  std::condition_variable closing_;  // the owner is leaving or closing
  std::thread thread_;
};

}  // namespace deepshard::comm
