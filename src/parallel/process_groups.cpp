// make_parallel_groups: the per-axis sub-groups of the world group, named "<axis>/<group index>".
#include "parallel/process_groups.h"

#include "deepshard/util/error.h"

namespace deepshard::parallel {

comm::Group& ParallelGroups::of(Axis axis) {
  switch (axis) {
    case Axis::kData:
      return *data;
    case Axis::kPipeline:
      return *pipeline;
    case Axis::kTensor:
      return *tensor;
  }
  DS_ASSERT(false, "unknown axis");
  return *data;
}

RankGrid grid_from_config(const config::ParallelConfig& config, int world_size) {
  return RankGrid(world_size, static_cast<int>(config.pipeline.effective_stages()),
                  static_cast<int>(config.tensor_parallel.effective_size()));
}

ParallelGroups make_parallel_groups(const comm::Group& world, const RankGrid& grid,
                                    const comm::GroupOptions& options) {
  DS_CHECK(grid.world_size() == world.size(), ConfigError, "rank grid of ", grid.world_size(),
           " ranks for a world of ", world.size());
  ParallelGroups groups{grid, grid.coord(world.rank()), nullptr, nullptr, nullptr};
  auto make = [&](Axis axis) {
    const std::string name =
        detail::concat(to_string(axis), "/", grid.group_index(axis, world.rank()));
    return comm::create_subgroup(world, grid.members(axis, world.rank()), name, options);
  };
  groups.tensor = make(Axis::kTensor);
  groups.data = make(Axis::kData);
  groups.pipeline = make(Axis::kPipeline);
  return groups;
}

}  // namespace deepshard::parallel
