// Implementation of agree_on_save (see tag_validation.h).
#include "zero/tag_validation.h"

#include <algorithm>
#include <cctype>

#include "deepshard/util/error.h"
#include "util/log.h"
#include "zero/rank_agreement.h"

namespace deepshard::zero {

std::string agree_on_save(comm::Group& group, const std::string& dir, const std::string& tag,
                          const std::string& mode) {
  const std::string prefix = "save_checkpoint(dir '" + dir + "', tag '", suffix = "')";
  const std::vector<std::string> all = all_gather_text(group, prefix + tag + suffix);
  std::vector<std::string> tags;
  for (const std::string& op : all) {
    const bool save_here = op.size() >= prefix.size() + suffix.size() &&
                           op.compare(0, prefix.size(), prefix) == 0 &&
                           op.compare(op.size() - suffix.size(), suffix.size(), suffix) == 0;
    if (!save_here) throw_different_operations(all);
    tags.push_back(op.substr(prefix.size(), op.size() - prefix.size() - suffix.size()));
  }
  bool same = true;
  std::string listing;
  for (size_t r = 0; r < tags.size(); ++r) {
    same = same && tags[r] == tags[0];
    listing += detail::concat(r ? ", " : "", "rank ", r, " '", tags[r], "'");
  }
  if (same) return tag;
  std::string m = mode;
  std::transform(m.begin(), m.end(), m.begin(), [](unsigned char c) { return std::tolower(c); });
  DS_CHECK(m != "fail", Error,
           "save_checkpoint: checkpoint.tag_validation=Fail and the ranks were given different "
           "tags (",
           listing, "); the tag must be the same on every rank");
  if (m != "ignore" && group.rank() == 0) {
    log::warn("save_checkpoint: the ranks were given different tags (", listing,
              "); every rank saves under rank 0's tag '", tags[0],
              "' (checkpoint.tag_validation=", mode, ")");
  }
  return tags[0];
}

}  // namespace deepshard::zero
