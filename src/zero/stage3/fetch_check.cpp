// Implementation of FetchCheck (see fetch_check.h).
#include "zero/stage3/fetch_check.h"

#include <ATen/ATen.h>

#include "deepshard/util/error.h"

namespace deepshard::zero {
namespace {

// splitmix64's finalizer over the previous hash and the unit.
uint64_t mix(uint64_t h, uint64_t unit) {
  uint64_t z = h ^ (unit + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

FetchCheck::FetchCheck(std::vector<std::string> names)
    : names_(std::move(names)), pending_(names_.size()) {}

std::string FetchCheck::name(int64_t unit) const {
  if (unit >= 0 && size_t(unit) < names_.size()) return names_[size_t(unit)];
  return detail::concat("unit #", unit);
}

void FetchCheck::start(comm::Group& group, size_t unit) {
  DS_ASSERT(unit < pending_.size(), "ZeRO-3: no unit ", unit);
  Pending& p = pending_[unit];
  finish(unit);  // at most one per unit (a gather of a gathered unit refreshes it)
  const int64_t mine[3] = {int64_t(unit), int64_t(gathers_), int64_t(hash_)};
  hash_ = mix(hash_, unit);
  ++gathers_;
  if (group.size() == 1) return;
  if (!p.in.defined()) p.in = at::empty({3}, at::kLong);
  // Sized for the largest group checked so far (hpZ's backward gathers check inside its group).
  if (!p.tags.defined() || p.tags.size(0) < group.size())
    p.tags = at::empty({group.size(), 3}, at::kLong);
  for (int i = 0; i < 3; ++i) p.in.data_ptr<int64_t>()[i] = mine[i];
  p.rank = group.rank();
  p.ranks = group.size();
  p.work = group.all_gather_async(p.tags.narrow(0, 0, group.size()), p.in);
  p.active = true;
}

void FetchCheck::finish(size_t unit) {
  Pending& p = pending_[unit];
  if (!p.active) return;
  p.active = false;
  p.work.wait();
  const at::Tensor& tags = p.tags;
  const auto* t = tags.data_ptr<int64_t>();
  const int64_t n = p.ranks;
  for (int64_t r = 1; r < n; ++r) {
    const int64_t* a = t;
    const int64_t* b = t + 3 * r;
    if (a[0] == b[0] && a[1] == b[1] && a[2] == b[2]) continue;
    if (a[1] == b[1] && a[2] == b[2]) {
      throw Error(detail::concat(
          "ZeRO-3: the ranks' unit sequences differ: gather #", a[1], " is unit ", name(a[0]),
          " on rank 0 but unit ", name(b[0]), " on rank ", r, " (this rank is ", p.rank,
          "); its slices would pair different units. Every rank must run the same modules in the "
          "same order (no rank-dependent branches around units)"));
    }
    throw Error(detail::concat("ZeRO-3: the ranks' unit sequences differ before gather #", a[1],
                               " (rank 0 at gather #", a[1], " of unit ", name(a[0]), ", rank ", r,
                               " at gather #", b[1], " of unit ", name(b[0]),
                               "; running hashes differ; this rank is ", p.rank,
                               "). Every rank must run the same modules in the same order"));
  }
}

}  // namespace deepshard::zero
