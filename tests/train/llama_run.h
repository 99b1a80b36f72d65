// The Llama variant of the training tests' tiny run (run_helpers.h): the sections that turn the
// tiny GPT run file into a Llama of the same sizes, for `extra`.
#pragma once

#include <string>

namespace deepshard::testing {

// JSON text to merge over tiny_run_config(): model.arch "llama" with 2 key/value heads (grouped-
// query attention, 2 query heads each) and SwiGLU width 176, the run's 2 layers, 4 heads, 64 wide,
// block 32 otherwise. `model` (a JSON object text) is merged into the model section, `more` into
// the whole.
std::string tiny_llama_section(const std::string& model = "{}", const std::string& more = "{}");

}  // namespace deepshard::testing
