// Every parameter of a GPT or Llama as (name, shape, pipeline item), derived from the config alone,
// in the model's named_parameters() order and with its names (a tied head is not listed twice):
// what the estimator splits over tensor ranks and pipeline stages without building the model.
// tests/models/parameter_shapes_test.cpp checks them against the built models.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "deepshard/models/gpt.h"
#include "deepshard/models/llama.h"

namespace deepshard::models {

struct NamedShape {
  // The pipeline items a parameter belongs to: the embedding (what embed() uses), layer i (unit i
  // of the sharding plan: item = i), or the head (everything else: final norm, output head).
  static constexpr int64_t kEmbedding = -1, kHead = -2;

  std::string name;
  std::vector<int64_t> shape;
  int64_t item = kHead;
  int64_t numel() const;
};

std::vector<NamedShape> gpt_parameter_shapes(const GptConfig& config);
std::vector<NamedShape> llama_parameter_shapes(const LlamaConfig& config);

}  // namespace deepshard::models
