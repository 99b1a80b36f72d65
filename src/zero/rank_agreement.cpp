// Implementation of the rank agreement helpers (rank_agreement.h).
#include "zero/rank_agreement.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "deepshard/util/error.h"

namespace deepshard::zero {

std::vector<std::string> all_gather_text(comm::Group& group, const std::string& text) {
  const int n = group.size();
  if (n == 1) return {text};
  // int64 carriers: the element type every collective here is known to move.
  at::Tensor lengths = at::zeros({n}, at::kLong);
  group.all_gather(lengths, at::full({1}, static_cast<int64_t>(text.size()), at::kLong));
  const int64_t longest = std::max<int64_t>(1, lengths.max().item<int64_t>());
  at::Tensor mine = at::zeros({longest}, at::kLong);
  int64_t* m = mine.data_ptr<int64_t>();
  for (size_t i = 0; i < text.size(); ++i) m[i] = static_cast<unsigned char>(text[i]);
  at::Tensor all = at::zeros({n * longest}, at::kLong);
  group.all_gather(all, mine);
  std::vector<std::string> out(n);
  const int64_t* p = all.data_ptr<int64_t>();
  for (int r = 0; r < n; ++r) {
    const int64_t len = lengths.data_ptr<int64_t>()[r];
    for (int64_t i = 0; i < len; ++i) out[r].push_back(static_cast<char>(p[r * longest + i]));
  }
  return out;
}

void throw_different_operations(const std::vector<std::string>& operations) {
  std::string message = "the ranks called different collective operations:";
  for (size_t r = 0; r < operations.size(); ++r)
    message += detail::concat("\n  rank ", r, ": ", operations[r]);
  throw Error(message);
}

void agree_on_operation(comm::Group& group, const std::string& operation) {
  const auto all = all_gather_text(group, operation);
  if (std::all_of(all.begin(), all.end(), [&](const std::string& s) { return s == all[0]; }))
    return;
  throw_different_operations(all);
}

void check_all_succeeded(comm::Group& group, const std::string& what, const std::string& error) {
  const auto all = all_gather_text(group, error);
  std::string message;
  for (size_t r = 0; r < all.size(); ++r) {
    if (!all[r].empty()) message += detail::concat("\n  rank ", r, ": ", all[r]);
  }
  if (!message.empty()) throw Error(what + " failed" + message);
}

}  // namespace deepshard::zero
