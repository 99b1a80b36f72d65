// One communicator per axis of the rank grid (rank_grid.h): this rank's data-parallel group (what
// ZeRO partitions over and the batch arithmetic counts), its pipeline group (stage neighbours) and
// its tensor-parallel group. Each is a sub-group of the world group (comm::create_subgroup) with
// its own rendezvous prefix, so its Gloo pairs or shared-memory segment are its own.
#pragma once

#include <memory>

#include "deepshard/comm/group.h"
#include "comm/transport_options.h"
#include "deepshard/config/parallel_config.h"
#include "parallel/rank_grid.h"

namespace deepshard::parallel {

struct ParallelGroups {
  RankGrid grid;
  GridCoord coord;  // this rank's place in the grid
  std::unique_ptr<comm::Group> data, pipeline, tensor;

  comm::Group& of(Axis axis);
};

// The grid a config asks for on `world_size` ranks (pipeline.stages and tensor_parallel.size when
// enabled, else 1). Throws ConfigError when they do not divide the world.
RankGrid grid_from_config(const config::ParallelConfig& config, int world_size);

// Every rank of `world` calls this at the same point. `grid.world_size()` must equal world.size().
// Groups are made in the order tensor, data, pipeline; an axis of size 1 is a local group.
ParallelGroups make_parallel_groups(const comm::Group& world, const RankGrid& grid,
                                    const comm::GroupOptions& options);

}  // namespace deepshard::parallel
