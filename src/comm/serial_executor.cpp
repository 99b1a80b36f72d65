// Implementation of SerialExecutor: a queue drained by one thread; handles wrap a Future whose
// wait() rethrows the operation's exception.
#include "comm/serial_executor.h"

#include <ATen/core/ivalue.h>
#include <c10/core/GradMode.h>

namespace deepshard::comm {
namespace {

class FutureWork : public c10d::Work {
 public:
  explicit FutureWork(c10::intrusive_ptr<c10::ivalue::Future> future)
      : future_(std::move(future)) {}
  bool isCompleted() override { return future_->completed(); }
  bool isSuccess() const override { return future_->completed() && !future_->hasError(); }
  bool wait(std::chrono::milliseconds) override {
    future_->waitAndThrow();
    return true;
  }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

}  // namespace

SerialExecutor::SerialExecutor() : thread_([this] { run(); }) {}

SerialExecutor::~SerialExecutor() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

c10::intrusive_ptr<c10d::Work> SerialExecutor::submit(std::function<void()> op) {
  auto future = c10::make_intrusive<c10::ivalue::Future>(c10::NoneType::get());
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(Task{std::move(op), future});
  }
  cv_.notify_one();
  return c10::make_intrusive<FutureWork>(future);
}

void SerialExecutor::run() {
  c10::AutoGradMode no_grad(false);  // operations touch raw buffers only
  for (;;) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything queued has run
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    try {
      task.op();
      task.future->markCompleted(c10::IValue());
    } catch (...) {
      task.future->setError(std::current_exception());
    }
  }
}

}  // namespace deepshard::comm
