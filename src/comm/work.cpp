// Work and Work::Impl: waiting on a collective, running its local post-processing, turning
// transport errors (timeouts, dead peers) into CommError, and recording it in the comm log. The
// logged time runs from the start to the end of the transfer (taken on the transport's thread, so
// a late wait() does not inflate it) plus the post-processing; the wait time is how long the
// caller of wait() was blocked, transfer and post-processing included.
#include <c10/util/Exception.h>

#include "comm/job_status.h"
#include "comm/work_impl.h"
#include "util/log.h"

namespace deepshard::comm {
namespace {

std::string dtype_name(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return "float";
    case at::kDouble:
      return "double";
    case at::kHalf:
      return "half";
    case at::kBFloat16:
      return "bfloat16";
    case at::kLong:
      return "int64";
    case at::kInt:
      return "int32";
    case at::kShort:
      return "int16";
    case at::kChar:
      return "int8";
    case at::kByte:
      return "uint8";
    case at::kBool:
      return "bool";
    default:
      return c10::toString(t);
  }
}

}  // namespace

std::string describe(const OpInfo& info) {
  return detail::concat("rank ", info.rank, ": ", info.op, " of ", info.numel, " elements (",
                        dtype_name(info.dtype), ")");
}

std::string describe_failure(const OpInfo& info, const std::string& reason) {
  // A peer's death usually surfaces here first (a reset connection); the store names the rank.
  const std::string lost = job_lost_reason(std::chrono::milliseconds(1000));
  const bool named = lost.empty() || reason.find(lost) != std::string::npos;
  return describe(info) + " failed: " + reason + (named ? "" : "; the job stops: " + lost);
}

Work::Impl::Impl(OpInfo info, CommLog& log, Clock::time_point start,
                 c10::intrusive_ptr<c10d::Work> work, std::function<void()> finish)
    : info_(std::move(info)),
      log_(log),
      start_(start),
      work_(std::move(work)),
      finish_(std::move(finish)),
      transfer_ns_(std::make_shared<std::atomic<int64_t>>(-1)) {
  auto transfer_ns = transfer_ns_;
  auto mark_done = [transfer_ns, start] {
    *transfer_ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count();
  };
  if (work_) {
    work_->getFuture()->addCallback([mark_done](c10::ivalue::Future&) { mark_done(); });
  } else {
    mark_done();  // the transport finished at issue
  }
}

void Work::Impl::wait() {
  if (waited_) return;
  waited_ = true;  // a failed collective is not waited on again
  const auto wait_start = Clock::now();
  if (work_) {
    try {
      work_->wait();
    } catch (const c10::Error& e) {
      throw CommError(describe_failure(info_, e.what_without_backtrace()));
    } catch (const std::exception& e) {
      throw CommError(describe_failure(info_, e.what()));
    }
  }
  int64_t ns = transfer_ns_->load();
  auto transfer_end = ns >= 0 ? start_ + std::chrono::nanoseconds(ns) : Clock::now();
  auto finish_start = Clock::now();
  if (finish_) finish_();
  finish_ = nullptr;  // releases what it held (scratch buffers)
  const auto end = Clock::now();
  std::chrono::duration<double> seconds = (transfer_end - start_) + (end - finish_start);
  std::chrono::duration<double> waited = end - wait_start;
  log_.record(info_.op, info_.bytes, seconds.count(), waited.count());
  if (info_.link) log_.record_link(*info_.link, info_.bytes, seconds.count(), waited.count());
}

Work::Work() = default;
Work::Work(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Work::Work(Work&&) noexcept = default;
Work& Work::operator=(Work&& other) noexcept {
  if (this != &other) {
    Work discarded(std::move(*this));  // an unwaited handle being replaced is waited on
    impl_ = std::move(other.impl_);
  }
  return *this;
}

Work::~Work() {
  if (!impl_ || impl_->completed()) return;
  try {
    impl_->wait();
  } catch (const std::exception& e) {
    log::error("a collective nobody waited for failed: ", e.what());
  }
}

void Work::wait() {
  if (impl_) impl_->wait();
}

bool Work::completed() const { return !impl_ || impl_->completed(); }

}  // namespace deepshard::comm
