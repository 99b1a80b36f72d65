// The tiny Llama run sections (llama_run.h).
#include "train/llama_run.h"

#include <nlohmann/json.hpp>

namespace deepshard::testing {

std::string tiny_llama_section(const std::string& model, const std::string& more) {
  nlohmann::json j = {{"model", {{"arch", "llama"}, {"n_kv_head", 2}, {"intermediate_size", 176}}}};
  j["model"].merge_patch(nlohmann::json::parse(model));
  j.merge_patch(nlohmann::json::parse(more));
  return j.dump();
}

}  // namespace deepshard::testing
