// How a model's layers are split over pipeline stages (DeepSpeed's PipelineModule
// partition_method). The items are [embedding, block 0, ..., block n-1, head]: the embedding
// always lands on the first stage and the final norm + head + loss on the last; every stage keeps
// a contiguous run of blocks.
//  - uniform: the blocks split by count, the first n % stages stages one block more
//    (DeepSpeed's partition_uniform over the transformer layers);
//  - parameters: contiguous parts of the items whose largest parameter count is the smallest
//    possible (DeepSpeed's partition_balanced over per-layer parameter counts; the tied head
//    counts the embedding's weight again, as DeepSpeed's TiedLayerSpec does, since the last stage
//    holds its own copy).
// Pure arithmetic, no torch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace deepshard::parallel {

enum class PartitionMethod { kUniform, kParameters };

// "uniform" | "parameters"; throws ConfigError naming pipeline.partition_method otherwise.
PartitionMethod parse_partition_method(const std::string& text);
const char* to_string(PartitionMethod method);

struct StagePartition {
  // Stage s runs blocks [block_begin[s], block_begin[s + 1]); size stages + 1.
  std::vector<int64_t> block_begin;
  int stages() const { return static_cast<int>(block_begin.size()) - 1; }
  int64_t begin(int stage) const { return block_begin.at(stage); }
  int64_t end(int stage) const { return block_begin.at(stage + 1); }
  // "stage 0: embedding + blocks 0-1; stage 1: blocks 2-3 + head"
  std::string describe() const;
};

// Blocks split by count. Throws ConfigError (naming pipeline.stages) when there are fewer blocks
// than stages.
StagePartition partition_uniform(int64_t blocks, int stages);

// embedding, block and head parameter counts -> the contiguous split of [embedding, blocks...,
// head] into `stages` non-empty parts whose heaviest part is lightest (of those, the one where
// each part takes as many items as fit, as DeepSpeed's greedy probe does). Throws ConfigError
// when there are fewer items than stages.
StagePartition partition_parameters(int64_t embedding, const std::vector<int64_t>& blocks,
                                    int64_t head, int stages);

}  // namespace deepshard::parallel
