// What a group made from another one by code that was given only the parent (ZeRO++'s hpZ groups,
// made by the stage-3 engine from its group) takes from it: the options the parent was made with,
// and optionally the parent's comm log, so that the sub-group's traffic is counted as the
// parent's (metrics.jsonl, summary.json, the comms logger).
#pragma once

#include "deepshard/comm/group.h"
#include "comm/transport_options.h"

namespace deepshard::comm {

// The options `group` was made with (Group::create: its timeout, kAuto).
GroupOptions options_of(const Group& group);

// From now on, `group`'s collectives (calls, bytes, seconds, link classes) are recorded in
// `parent`'s log instead of its own, and group.log() is that log; `parent` must outlive `group`.
// A group spanning hosts keeps recording its hierarchical stages' link classes in its own log.
void record_into(Group& group, Group& parent);

}  // namespace deepshard::comm
