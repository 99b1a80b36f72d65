// The stage-3 run file the ZeRO++ tests compare against: blocks released after each use
// (DeepSpeed's defaults would keep the tiny blocks gathered), prefetch on, the comms logger on,
// plus `zero_keys` in zero_optimization and `more` merged over the whole.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace deepshard::testing {

inline std::string released_stage3(const nlohmann::json& zero_keys,
                                   const std::string& more = "{}") {
  nlohmann::json j = {
      {"zero_optimization",
       {{"stage", 3}, {"stage3_param_persistence_threshold", 0}, {"stage3_max_reuse_distance", 0}}},
      {"comms_logger", {{"enabled", true}}}};
  j["zero_optimization"].update(zero_keys);
  j.merge_patch(nlohmann::json::parse(more));
  return j.dump();
}

}  // namespace deepshard::testing
