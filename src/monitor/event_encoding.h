// The serialized Event protobufs deepshard writes (protoc-generated classes behind this header, so
// that nothing else includes them): the file_version event that opens a file and a scalar event.
#pragma once

#include <string>

#include "monitor/monitor.h"

namespace deepshard::monitor::detail {

std::string file_version_event(double wall_time);
// Event{wall_time, step, summary{value{tag, simple_value}}}, as PyTorch's add_scalar writes it.
std::string scalar_event(const ScalarEvent& event, double wall_time);

}  // namespace deepshard::monitor::detail
