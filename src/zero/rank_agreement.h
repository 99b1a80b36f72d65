// Agreement among the ranks before and after a collective operation that has local failure modes
// (checkpoint save and load): every rank contributes a text and every rank sees all of them, so a
// rank that calls something else, or fails locally, turns into the same clear error on every rank
// instead of a hang or a rank that carries on alone.
#pragma once

#include <string>
#include <vector>

#include "deepshard/comm/group.h"

namespace deepshard::zero {

// Every rank's `text`, in rank order (two all-gathers).
std::vector<std::string> all_gather_text(comm::Group& group, const std::string& text);

// Throws Error on every rank unless every rank passed the same `operation` (the message lists
// what each rank called).
void agree_on_operation(comm::Group& group, const std::string& operation);

// Throws the Error agree_on_operation throws, listing every rank's operation.
[[noreturn]] void throw_different_operations(const std::vector<std::string>& operations);

// `error`: this rank's failure ("" = none). Throws Error on every rank, naming the failed ranks
// and their messages, unless every rank succeeded.
void check_all_succeeded(comm::Group& group, const std::string& what, const std::string& error);

}  // namespace deepshard::zero
