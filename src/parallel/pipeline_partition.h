// How a model's layers are split over pipeline stages: DeepSpeed's pipeline.partition /
// PipelineModule partition_method, with DeepSpeed's algorithms (deepspeed/runtime/utils.py) and
// results. The items are a pipeline's layer specs, [embedding, block 0, ..., block n-1, head] (the
// head: the final norm, the output projection and the loss), every one a unit of the split:
//  - uniform: the items split by count, the first (items % stages) stages one more
//    (partition_uniform);
//  - parameters: the items' parameter counts split into contiguous parts by DeepSpeed's balanced
//    partition (partition_balanced: the dynamic programme that keeps, for each prefix and part
//    count, the split with the smallest difference between its heaviest and its lightest part;
//    a tied head counts the embedding's weight again, as DeepSpeed counts a TiedLayerSpec on
//    every stage that builds it, since the last stage holds its own copy);
//  - type:<regex>: the items whose layer type matches the regex (searched, case-insensitive) weigh
//    1 and the others 0, then the balanced partition of those weights.
// The embedding is always on the first stage and the head on the last; every stage holds at least
// one item. Pure arithmetic and regular expressions, no torch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace deepshard::parallel {

struct PartitionMethod {
  enum class Kind { kUniform, kParameters, kType };
  Kind kind = Kind::kParameters;
  std::string type_regex;  // kType: the pattern, as DeepSpeed reads it (lower case)

  static const PartitionMethod kUniform, kParameters;
  static PartitionMethod type(std::string regex) { return {Kind::kType, std::move(regex)}; }
  bool operator==(const PartitionMethod&) const = default;
};
inline const PartitionMethod PartitionMethod::kUniform{PartitionMethod::Kind::kUniform, ""};
inline const PartitionMethod PartitionMethod::kParameters{PartitionMethod::Kind::kParameters, ""};

// DeepSpeed's reading of a method name (config::read_partition_method): lower-cased, "uniform" |
// "parameters" | "type:<regex>" (the regex is the text after "type:" up to the next ':'). Throws
// ConfigError naming `key` for anything else ("profile" is not implemented by DeepSpeed either)
// and for a regex that does not compile.
PartitionMethod parse_partition_method(const std::string& text,
                                       const std::string& key = "pipeline.partition");
// "uniform" | "parameters" | "type:<regex>"
std::string to_string(const PartitionMethod& method);

// DeepSpeed's partition_uniform(num_items, num_parts): part p is items [b[p], b[p + 1]); with
// fewer items than parts the last parts are empty.
std::vector<int64_t> uniform_boundaries(int64_t items, int64_t parts);
// DeepSpeed's partition_balanced(weights, num_parts): with no more items than parts, as
// uniform_boundaries; else every part non-empty, chosen by its dynamic programme (ties to the
// latest split point).
std::vector<int64_t> balanced_boundaries(const std::vector<int64_t>& weights, int64_t parts);
// 1 for each name `regex` finds a match in (case-insensitive), else 0. Throws ConfigError naming
// `key` when nothing matches (DeepSpeed: "Partitioning '...' found no valid layers").
std::vector<int64_t> type_weights(const std::vector<std::string>& names, const std::string& regex,
                                  const std::string& key = "pipeline.partition");

struct StagePartition {
  // Stage s runs blocks [block_begin[s], block_begin[s + 1]); size stages + 1.
  std::vector<int64_t> block_begin;
  int stages() const { return static_cast<int>(block_begin.size()) - 1; }
  int64_t begin(int stage) const { return block_begin.at(stage); }
  int64_t end(int stage) const { return block_begin.at(stage + 1); }
  // "stage 0: embedding + blocks 0-1; stage 1: blocks 2-3 + head"
  std::string describe() const;
};

// A model's layer specs for the split: [embedding, blocks..., head], each with its layer type (the
// name type:<regex> searches) and its parameter count.
struct PipelineItems {
  std::vector<std::string> types;
  std::vector<int64_t> params;
  int64_t blocks() const { return static_cast<int64_t>(types.size()) - 2; }
};

// The split of `items` over `stages` by `method`. Throws ConfigError (naming pipeline.stages) when
// there are fewer items than stages, (naming pipeline.partition) when type: matches nothing.
StagePartition partition_items(const PipelineItems& items, const PartitionMethod& method,
                               int stages);

// Shorthands over [embedding, blocks..., head]: uniform by count, and balanced by the given
// parameter counts.
StagePartition partition_uniform(int64_t blocks, int stages);
StagePartition partition_parameters(int64_t embedding, const std::vector<int64_t>& blocks,
                                    int64_t head, int stages);

}  // namespace deepshard::parallel
