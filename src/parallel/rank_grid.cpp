// RankGrid: the rank arithmetic of world = data x pipeline x tensor (tensor fastest).
#include "parallel/rank_grid.h"

#include <set>
#include <sstream>

#include "deepshard/util/error.h"

namespace deepshard::parallel {

const char* to_string(Axis axis) {
  switch (axis) {
    case Axis::kData:
      return "data";
    case Axis::kPipeline:
      return "pipeline";
    case Axis::kTensor:
      return "tensor";
  }
  return "?";
}

RankGrid::RankGrid(int world_size, int pipeline, int tensor)
    : world_(world_size), data_(0), pipeline_(pipeline), tensor_(tensor) {
  DS_CHECK(world_size >= 1, ConfigError, "rank grid: world size must be >= 1, got ", world_size);
  DS_CHECK(pipeline >= 1, ConfigError, "pipeline.stages: must be >= 1, got ", pipeline);
  DS_CHECK(tensor >= 1, ConfigError, "tensor_parallel.size: must be >= 1, got ", tensor);
  DS_CHECK(world_size % (pipeline * tensor) == 0, ConfigError,
           pipeline > 1 ? "pipeline.stages" : "tensor_parallel.size", ": the job's ", world_size,
           " ranks are not divisible by pipeline stages (", pipeline, ") x tensor size (", tensor,
           ")");
  data_ = world_size / (pipeline * tensor);
}

int RankGrid::size(Axis axis) const {
  switch (axis) {
    case Axis::kData:
      return data_;
    case Axis::kPipeline:
      return pipeline_;
    case Axis::kTensor:
      return tensor_;
  }
  return 0;
}

GridCoord RankGrid::coord(int rank) const {
  DS_ASSERT(rank >= 0 && rank < world_, "rank ", rank, " outside a world of ", world_);
  GridCoord c;
  c.tensor = rank % tensor_;
  c.data = (rank / tensor_) % data_;
  c.pipeline = rank / (tensor_ * data_);
  return c;
}

int RankGrid::rank(const GridCoord& c) const {
  DS_ASSERT(c.tensor >= 0 && c.tensor < tensor_ && c.data >= 0 && c.data < data_ &&
                c.pipeline >= 0 && c.pipeline < pipeline_,
            "grid coordinate outside the grid");
  return c.tensor + tensor_ * (c.data + data_ * c.pipeline);
}

std::vector<int> RankGrid::members(Axis axis, int rank_in) const {
  GridCoord c = coord(rank_in);
  std::vector<int> out;
  for (int i = 0; i < size(axis); ++i) {
    GridCoord m = c;
    (axis == Axis::kData ? m.data : axis == Axis::kPipeline ? m.pipeline : m.tensor) = i;
    out.push_back(rank(m));
  }
  return out;  // ascending: rank() grows with every coordinate
}

int RankGrid::group_index(Axis axis, int rank_in) const {
  const int first = members(axis, rank_in).front();
  int index = 0;
  for (int r = 0; r < first; ++r) index += members(axis, r).front() == r ? 1 : 0;
  return index;
}

std::string RankGrid::describe() const {
  std::ostringstream os;
  os << "world " << world_ << " = data " << data_ << " x pipeline " << pipeline_ << " x tensor "
     << tensor_;
  for (Axis axis : {Axis::kTensor, Axis::kData, Axis::kPipeline}) {
    os << "; " << to_string(axis) << " groups";
    for (int r = 0; r < world_; ++r) {
      std::vector<int> m = members(axis, r);
      if (m.front() != r) continue;
      os << " [";
      for (size_t i = 0; i < m.size(); ++i) os << (i ? " " : "") << m[i];
      os << "]";
    }
  }
  return os.str();
}

}  // namespace deepshard::parallel
