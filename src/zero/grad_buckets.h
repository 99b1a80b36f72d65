// GradBuckets: gradient reduction in buckets of at most `bucket_numel` elements over a flat
// gradient buffer, started while backward still runs. A parameter reports itself ready (from its
// grad-accumulator post-hook) once its gradient is final; when every parameter of a bucket is
// ready the bucket's reduction starts asynchronously. Buckets are started strictly in index order
// so that every rank issues the same sequence of collectives whatever the order of hooks; a
// bucket that never becomes ready (unused parameters) is started by finish(). Optionally, a
// completion callback post-processes each finished reduction and the number in flight is bounded
// (stage 2's double-buffered receive buffers).
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <vector>

#include "deepshard/comm/group.h"

namespace deepshard::zero {

class GradBuckets {
 public:
  struct Slot {
    int64_t offset = 0;  // in the flat buffer
    int64_t numel = 0;
  };
  // Starts the reduction of flat[offset, offset + numel) and returns its handle.
  using Reducer = std::function<comm::Work(int64_t offset, int64_t numel)>;

  // `slots`: the parameters, in flat-buffer order, contiguous. A parameter larger than
  // bucket_numel gets a bucket of its own. `padded_numel`: the buffer's size; the padding tail
  // joins the last bucket.
  GradBuckets(const std::vector<Slot>& slots, int64_t padded_numel, int64_t bucket_numel,
              Reducer reducer);
  // An explicit layout: bucket b reduces flat[buckets[b].offset, + numel); slot i belongs to
  // bucket bucket_of_slot[i]. Every bucket must hold at least one slot.
  GradBuckets(const std::vector<Slot>& buckets, const std::vector<size_t>& bucket_of_slot,
              Reducer reducer);

  // Called with a bucket's index once its reduction has completed (after wait()), in index order,
  // before any reduction that could reuse that bucket's buffers starts.
  using Completion = std::function<void(size_t bucket)>;
  void set_completion(Completion completion) { completion_ = std::move(completion); }
  // At most `n` reductions in flight (0: no limit): starting another first completes the oldest.
  void set_max_in_flight(size_t n) { max_in_flight_ = n; }

  // Begins a backward pass whose gradients are to be reduced (the accumulation boundary).
  void begin();
  // Parameter `slot` has its final gradient. Ignored outside begin()/finish().
  void mark_ready(size_t slot);
  // Starts every bucket not yet started, waits for all, and ends the pass.
  void finish();

  bool active() const { return active_; }
  // In the current pass: bucket's reduction has completed (and its completion callback has run).
  bool completed(size_t bucket) const { return active_ && bucket < next_to_complete_; }
  size_t num_buckets() const { return buckets_.size(); }

 private:
  struct Bucket {
    int64_t offset = 0, numel = 0;
    size_t num_slots = 0;
    size_t pending = 0;
    comm::Work work;
    bool started = false;
  };
  void init(const std::vector<Slot>& buckets, const std::vector<size_t>& bucket_of_slot);
  void start_ready_buckets_in_order();
  void start_next();                  // starts bucket next_to_start_, within the in-flight limit
  void complete_through(size_t end);  // waits for buckets [next_to_complete_, end)

  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_slot_;
  std::vector<bool> slot_ready_;
  Reducer reducer_;
  Completion completion_;
  size_t max_in_flight_ = 0;
  size_t next_to_start_ = 0;
  size_t next_to_complete_ = 0;
  bool active_ = false;
};

}  // namespace deepshard::zero
