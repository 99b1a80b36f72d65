// One thread that runs a transport's operations one after another, in the order they were
// submitted (collectives must run in issue order, which is the same on every rank). Each
// submission returns a c10d::Work handle that completes when its operation has run, carrying the
// operation's exception if it threw. The destructor runs what is queued, then joins.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <torch/csrc/distributed/c10d/Work.hpp>

namespace deepshard::comm {

class SerialExecutor {
 public:
  SerialExecutor();
  ~SerialExecutor();
  SerialExecutor(const SerialExecutor&) = delete;
  SerialExecutor& operator=(const SerialExecutor&) = delete;

  c10::intrusive_ptr<c10d::Work> submit(std::function<void()> op);

 private:
  struct Task {
    std::function<void()> op;
    c10::intrusive_ptr<c10::ivalue::Future> future;
  };
  void run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace deepshard::comm
