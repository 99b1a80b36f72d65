// DistributedSampler: the windows of a step are a pure function of (seed, step, global sample
// index), hashed with splitmix64, so the global batch does not depend on the number of ranks and
// any step can be produced without replaying the ones before it (resume).
#include "data/sampler.h"

#include <ATen/ATen.h>

#include "deepshard/util/error.h"

namespace deepshard::data {
namespace {

// splitmix64's finalizer (Steele, Lea, Flood 2014): a bijective 64-bit mix.
uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// h mapped to [0, n) by multiply-high: no bias of a modulo of a non-power of two.
int64_t below(uint64_t h, uint64_t n) {
  return static_cast<int64_t>((static_cast<unsigned __int128>(h) * n) >> 64);
}

}  // namespace

DistributedSampler::DistributedSampler(const TokenFile& file, int64_t block_size,
                                       int64_t micro_batch, int64_t grad_accum_steps, int rank,
                                       int world_size, uint64_t seed)
    : file_(file),
      block_size_(block_size),
      micro_batch_(micro_batch),
      grad_accum_steps_(grad_accum_steps),
      rank_(rank),
      world_size_(world_size),
      seed_(seed) {
  DS_CHECK(block_size > 0 && micro_batch > 0 && grad_accum_steps > 0, Error,
           "DistributedSampler: block_size (", block_size, "), micro_batch (", micro_batch,
           ") and grad_accum_steps (", grad_accum_steps, ") must be positive");
  DS_CHECK(world_size > 0 && rank >= 0 && rank < world_size, Error, "DistributedSampler: rank ",
           rank, " is outside the world of ", world_size, " ranks");
  DS_CHECK(file.size() >= block_size + 1, IoError, file.path(), ": ", file.size(),
           " tokens, too short for one window of block_size + 1 = ", block_size + 1, " tokens");
}

int64_t DistributedSampler::global_index(int rank, int64_t micro_step, int64_t position) const {
  DS_ASSERT(rank >= 0 && rank < world_size_ && micro_step >= 0 && micro_step < grad_accum_steps_ &&
            position >= 0 && position < micro_batch_);
  return rank * (micro_batch_ * grad_accum_steps_) + micro_step * micro_batch_ + position;
}

int64_t DistributedSampler::sample_offset(int64_t step, int64_t index) const {
  DS_ASSERT(step >= 0 && index >= 0, "step ", step, ", index ", index);
  // Starts 0 .. size - block_size - 1, so the window of block_size + 1 tokens fits.
  const auto starts = static_cast<uint64_t>(file_.size() - block_size_);
  uint64_t h = splitmix64(seed_);
  h = splitmix64(h ^ static_cast<uint64_t>(step));
  h = splitmix64(h ^ static_cast<uint64_t>(index));
  return below(h, starts);
}

DistributedSampler::PassageWindow DistributedSampler::passage_window(int64_t step,
                                                                     int64_t index) const {
  DS_ASSERT(passages_ != nullptr && step >= 0 && index >= 0, "step ", step, ", index ", index);
  // The passage from the offset's hash chain, the start inside it from one more round.
  uint64_t h = splitmix64(seed_);
  h = splitmix64(h ^ static_cast<uint64_t>(step));
  h = splitmix64(h ^ static_cast<uint64_t>(index));
  PassageWindow w;
  w.passage = below(h, passages_->passages.size());
  const Passage& p = passages_->passages[size_t(w.passage)];
  DS_CHECK(p.length >= block_size_, IoError, passages_->path, ": passage ", w.passage + 1, " has ",
           p.length, " tokens, fewer than a window of ", block_size_);
  w.start = p.start + below(splitmix64(h), static_cast<uint64_t>(p.length - block_size_ + 1));
  return w;
}

int64_t DistributedSampler::sample_key(int64_t step, int64_t index) const {
  DS_ASSERT(step >= 0 && index >= 0, "step ", step, ", index ", index);
  // The offset's hash chain with one more round under a different constant: independent of it.
  uint64_t h = splitmix64(seed_ ^ 0x6b657973ULL);  // "keys"
  h = splitmix64(h ^ static_cast<uint64_t>(step));
  h = splitmix64(h ^ static_cast<uint64_t>(index));
  return static_cast<int64_t>(h >> 1);  // non-negative
}

Batch DistributedSampler::batch(int64_t step, int64_t micro_step) const {
  DS_CHECK(step >= 0 && micro_step >= 0 && micro_step < grad_accum_steps_, Error,
           "DistributedSampler::batch: step ", step, " micro-step ", micro_step,
           " (gradient accumulation has ", grad_accum_steps_, " micro-steps)");
  at::Tensor keys = at::empty({micro_batch_}, at::kLong);
  if (passages_ != nullptr) {
    at::Tensor inputs = at::empty({micro_batch_, block_size_}, at::kLong);
    at::Tensor labels = at::empty({micro_batch_}, at::kLong);
    for (int64_t p = 0; p < micro_batch_; ++p) {
      const int64_t index = global_index(rank_, micro_step, p);
      const PassageWindow w = passage_window(step, index);
      file_.read(w.start, block_size_, inputs.data_ptr<int64_t>() + p * block_size_);
      labels.data_ptr<int64_t>()[p] = passages_->passages[size_t(w.passage)].label;
      keys.data_ptr<int64_t>()[p] = sample_key(step, index);
    }
    return Batch{inputs, labels, keys};  // no objective: the targets are the classes
  }
  // Host buffer: the tokens come from a memory-mapped file; the caller moves them.
  at::Tensor windows = at::empty({micro_batch_, block_size_ + 1}, at::kLong);
  int64_t* out = windows.data_ptr<int64_t>();
  for (int64_t p = 0; p < micro_batch_; ++p) {
    const int64_t index = global_index(rank_, micro_step, p);
    file_.read(sample_offset(step, index), block_size_ + 1, out + p * (block_size_ + 1));
    keys.data_ptr<int64_t>()[p] = sample_key(step, index);
  }
  Batch batch{windows.narrow(1, 0, block_size_).contiguous(),
              windows.narrow(1, 1, block_size_).contiguous(), keys};
  if (objective_) objective_(batch);
  return batch;
}

}  // namespace deepshard::data
