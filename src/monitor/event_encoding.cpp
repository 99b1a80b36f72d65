// Implementation of event_encoding.h with the classes protoc generates from
// proto/tensorboard_event.proto.
#include "monitor/event_encoding.h"

#include "tensorboard_event.pb.h"

namespace deepshard::monitor::detail {

std::string file_version_event(double wall_time) {
  tensorboard::Event event;
  event.set_wall_time(wall_time);
  event.set_file_version("brain.Event:2");
  return event.SerializeAsString();
}

std::string scalar_event(const ScalarEvent& e, double wall_time) {
  tensorboard::Event event;
  event.set_wall_time(wall_time);
  event.set_step(e.step);
  auto* value = event.mutable_summary()->add_value();
  value->set_tag(e.tag);
  value->set_simple_value(static_cast<float>(e.value));
  return event.SerializeAsString();
}

}  // namespace deepshard::monitor::detail
