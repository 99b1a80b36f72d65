// DeepSpeed's checkpoint.tag_validation: before a save, the ranks compare the tags they were given.
// "Fail": different tags are an error on every rank naming each rank's tag; "Warn" (the default):
// a warning naming them; "Ignore": no message. With Warn and Ignore every rank then saves under
// rank 0's tag, so the checkpoint stays whole (DeepSpeed would write one folder per tag).
#pragma once

#include <string>

#include "deepshard/comm/group.h"

namespace deepshard::zero {

// The agreement before a save (agree_on_operation with "save_checkpoint(dir 'D', tag 'T')"):
// ranks calling other operations or saving into other folders are an error on every rank; ranks
// that differ only by their tags are handled as `mode` says. Returns the tag every rank saves
// under (collective: every rank calls it, once, as the save's first collective).
std::string agree_on_save(comm::Group& group, const std::string& dir, const std::string& tag,
                          const std::string& mode);

}  // namespace deepshard::zero
