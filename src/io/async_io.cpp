// AsyncIo on Linux AIO (async_io.h). Each worker thread owns an AIO context of queue_depth slots
// and serves parts of transfers one at a time: it cuts its part into block_size requests and keeps
// the queue full (overlap_events) or submits batch by batch, with one io_submit call per request
// (single_submit) or per batch. A transfer completes when its last part did; the first error wins.
#include "io/async_io.h"

#include <libaio.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "deepshard/util/error.h"
#include "io/swap_file.h"

namespace deepshard::io {
namespace detail {

struct Transfer {
  std::mutex mu;
  std::condition_variable cv;
  int parts_left = 0;
  std::string error;  // the first failure
};

struct Part {
  std::shared_ptr<Transfer> transfer;
  IoOp op = IoOp::kRead;
  int fd = -1;
  const std::string* path = nullptr;
  char* buffer = nullptr;
  int64_t bytes = 0;
  int64_t offset = 0;
};

struct Worker {
  explicit Worker(const AioOptions& options);
  ~Worker();
  void enqueue(Part part);

 private:
  void run();
  std::string transfer(const Part& part);  // "" on success, else the error

  const AioOptions& options_;
  io_context_t ctx_{};
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Part> queue_;
  bool stop_ = false;
  std::thread thread_;
};

Worker::Worker(const AioOptions& options) : options_(options) {
  const int rc = io_setup(static_cast<int>(options_.queue_depth), &ctx_);
  DS_CHECK(rc == 0, IoError, "io_setup(", options_.queue_depth, "): ", std::strerror(-rc),
           " (check /proc/sys/fs/aio-max-nr)");
  thread_ = std::thread([this] { run(); });
}

Worker::~Worker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  io_destroy(ctx_);
}

void Worker::enqueue(Part part) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(part));
  }
  cv_.notify_one();
}

void Worker::run() {
  for (;;) {
    Part part;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything queued is done
      part = std::move(queue_.front());
      queue_.pop_front();
    }
    std::string error = transfer(part);
    Transfer& t = *part.transfer;
    {
      std::lock_guard<std::mutex> lock(t.mu);
      if (!error.empty() && t.error.empty()) t.error = std::move(error);
      --t.parts_left;
    }
    t.cv.notify_all();
  }
}

std::string Worker::transfer(const Part& part) {
  const int64_t block = options_.block_size;
  const int64_t count = (part.bytes + block - 1) / block;
  const int depth = static_cast<int>(options_.queue_depth);
  std::vector<iocb> cbs(depth);
  std::vector<int> free_slots;
  for (int i = depth - 1; i >= 0; --i) free_slots.push_back(i);
  std::vector<io_event> events(depth);
  int64_t next = 0;
  int in_flight = 0;
  std::string error;
  auto describe = [&](int64_t offset, int64_t len, const std::string& why) {
    return deepshard::detail::concat(to_string(part.op), " of ", len, " bytes at offset ", offset,
                                     " of ", *part.path, " failed: ", why);
  };

  while ((next < count && error.empty()) || in_flight > 0) {
    // Refill: any free slot with overlap_events, else only once the previous batch is complete.
    std::vector<iocb*> batch;
    if (error.empty() && (options_.overlap_events || in_flight == 0)) {
      while (next < count && !free_slots.empty()) {
        const int64_t rel = next * block;
        const int64_t len = std::min(block, part.bytes - rel);
        const int64_t offset = part.offset + rel;
        if (options_.fault) {
          if (const int err = options_.fault(part.op, *part.path, offset); err != 0) {
            error = describe(offset, len, std::strerror(err));
            break;
          }
        }
        const int slot = free_slots.back();
        free_slots.pop_back();
        iocb* cb = &cbs[slot];
        if (part.op == IoOp::kRead) {
          io_prep_pread(cb, part.fd, part.buffer + rel, static_cast<size_t>(len), offset);
        } else {
          io_prep_pwrite(cb, part.fd, part.buffer + rel, static_cast<size_t>(len), offset);
        }
        cb->data = reinterpret_cast<void*>(static_cast<intptr_t>(slot));
        batch.push_back(cb);
        ++next;
      }
    }
    // Submit: one call per request (single_submit) or one for the batch; a partial submission
    // (the kernel's queue is full) leaves the rest for after the next completions.
    size_t done = 0;
    while (done < batch.size()) {
      const long n = options_.single_submit ? 1 : static_cast<long>(batch.size() - done);
      const int rc = io_submit(ctx_, n, batch.data() + done);
      if (rc == -EINTR) continue;
      if (rc <= 0) {
        if (rc == -EAGAIN && in_flight > 0) break;
        if (rc == -EAGAIN) {
          std::this_thread::yield();
          continue;
        }
        error = describe(part.offset + (next - static_cast<int64_t>(batch.size() - done)) * block,
                         block, deepshard::detail::concat("io_submit: ", std::strerror(-rc)));
        break;
      }
      done += static_cast<size_t>(rc);
      in_flight += rc;
    }
    // Requests prepared but not submitted go back (their slots free, `next` rewound).
    for (size_t i = done; i < batch.size(); ++i) {
      free_slots.push_back(static_cast<int>(reinterpret_cast<intptr_t>(batch[i]->data)));
      --next;
    }
    if (in_flight == 0) continue;
    // Reap: at least one completion with overlap_events, else the whole batch.
    const int want = options_.overlap_events ? 1 : in_flight;
    const int got = io_getevents(ctx_, want, depth, events.data(), nullptr);
    if (got == -EINTR) continue;
    if (got < 0) return describe(part.offset, part.bytes, std::strerror(-got));  // context broken
    for (int i = 0; i < got; ++i) {
      const io_event& ev = events[i];
      const iocb* cb = ev.obj;
      const int64_t expected = static_cast<int64_t>(cb->u.c.nbytes);
      const int64_t offset = cb->u.c.offset;
      const long res = static_cast<long>(ev.res);
      if (error.empty() && res < 0) error = describe(offset, expected, std::strerror(-res));
      if (error.empty() && res != expected) {
        error = describe(offset, expected,
                         deepshard::detail::concat("short transfer (", res, " of ", expected,
                                                   " bytes; disk full or file truncated?)"));
      }
      free_slots.push_back(static_cast<int>(reinterpret_cast<intptr_t>(ev.data)));
      --in_flight;
    }
  }
  return error;
}

}  // namespace detail

AsyncIo::AsyncIo(AioOptions options) : options_(std::move(options)) {
  validate(options_);
  if (!options_.fault) options_.fault = process_fault_hook();
  for (int64_t i = 0; i < options_.threads; ++i)
    workers_.push_back(std::make_unique<detail::Worker>(options_));
}

AsyncIo::~AsyncIo() = default;  // each worker finishes its queue, then stops

IoTicket AsyncIo::submit(IoOp op, const SwapFile& file, void* buffer, int64_t bytes,
                         int64_t offset) {
  DS_CHECK(reinterpret_cast<uintptr_t>(buffer) % kIoAlignment == 0 && bytes % kIoAlignment == 0 &&
               offset % kIoAlignment == 0 && bytes >= 0 && offset >= 0,
           IoError, to_string(op), " of ", file.path(), ": direct I/O needs the buffer, length (",
           bytes, ") and offset (", offset, ") aligned to ", kIoAlignment, " bytes");
  DS_CHECK(offset + bytes <= file.size(), IoError, to_string(op), " of ", file.path(), ": bytes [",
           offset, ", ", offset + bytes, ") are beyond its size ", file.size());
  IoTicket ticket;
  ticket.transfer_ = std::make_shared<detail::Transfer>();
  if (bytes == 0) return ticket;
  // One contiguous part per thread, aligned, the last one shorter.
  const int64_t threads = static_cast<int64_t>(workers_.size());
  const int64_t per = align_up((bytes + threads - 1) / threads);
  std::vector<detail::Part> parts;
  for (int64_t start = 0; start < bytes; start += per) {
    parts.push_back({ticket.transfer_, op, file.fd(), &file.path(),
                     static_cast<char*>(buffer) + start, std::min(per, bytes - start),
                     offset + start});
  }
  ticket.transfer_->parts_left = static_cast<int>(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) workers_[i]->enqueue(std::move(parts[i]));
  return ticket;
}

void AsyncIo::wait(IoTicket& ticket) {
  if (!ticket.transfer_) return;
  std::shared_ptr<detail::Transfer> t = std::move(ticket.transfer_);
  std::unique_lock<std::mutex> lock(t->mu);
  t->cv.wait(lock, [&] { return t->parts_left == 0; });
  if (!t->error.empty()) throw IoError(t->error);
}

void AsyncIo::read(const SwapFile& file, void* buffer, int64_t bytes, int64_t offset) {
  IoTicket t = submit(IoOp::kRead, file, buffer, bytes, offset);
  wait(t);
}

void AsyncIo::write(const SwapFile& file, void* buffer, int64_t bytes, int64_t offset) {
  IoTicket t = submit(IoOp::kWrite, file, buffer, bytes, offset);
  wait(t);
}

}  // namespace deepshard::io
