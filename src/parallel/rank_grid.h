// The rank grid of 3D parallelism: world = data x pipeline x tensor. Ranks are laid out as
// Megatron-LM and DeepSpeed's PipeModelDataParallelTopology do: tensor-parallel ranks are adjacent
// (they exchange the most), then data, then pipeline:
//   rank = tensor + T * (data + D * pipeline).
// Pure arithmetic (no communication); process_groups.h makes one communicator per axis from it.
#pragma once

#include <string>
#include <vector>

namespace deepshard::parallel {

enum class Axis { kData, kPipeline, kTensor };
const char* to_string(Axis axis);

struct GridCoord {
  int data = 0;
  int pipeline = 0;
  int tensor = 0;
  bool operator==(const GridCoord&) const = default;
};

class RankGrid {
 public:
  // world_size ranks split into `pipeline` stages of `tensor` ranks; the data-parallel size is
  // what remains. Throws ConfigError (naming pipeline.stages / tensor_parallel.size) when a size
  // is < 1 or world_size is not divisible by pipeline x tensor.
  RankGrid(int world_size, int pipeline, int tensor);

  int world_size() const { return world_; }
  int size(Axis axis) const;
  int data_size() const { return data_; }
  int pipeline_size() const { return pipeline_; }
  int tensor_size() const { return tensor_; }

  GridCoord coord(int rank) const;         // REQUIRES: 0 <= rank < world_size()
  int rank(const GridCoord& coord) const;  // REQUIRES: every coordinate within its axis

  // The ranks that share every coordinate with `rank` except along `axis`, ascending (the group
  // of `rank` on that axis; its position in it is coord(rank) along the axis).
  std::vector<int> members(Axis axis, int rank) const;
  // Which of the world_size() / size(axis) groups of `axis` holds `rank` (0-based, ordered by
  // their smallest rank): a name for the group that every member computes alike.
  int group_index(Axis axis, int rank) const;

  // One line for the log: "world 4 = data 2 x pipeline 1 x tensor 2; tensor groups [0 1] [2 3];
  // data groups [0 2] [1 3]; pipeline groups [0] [1] [2] [3]".
  std::string describe() const;

 private:
  int world_, data_, pipeline_, tensor_;
};

}  // namespace deepshard::parallel
