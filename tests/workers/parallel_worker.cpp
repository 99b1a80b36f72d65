// Multi-rank scenarios for the parallel layer, run by tests/parallel/process_groups_test.cpp
// through `deepshard launch -n N`: every rank builds the rank grid's groups and checks collectives
// on each axis against values computed from the grid alone.
#include <ATen/ATen.h>

#include <string>

#include "deepshard/util/error.h"
#include "parallel/process_groups.h"
#include "workers/worker.h"

namespace deepshard::testing {
namespace {

using parallel::Axis;

// args: PIPELINE TENSOR. On each axis: the group's size and rank follow the grid; an all_reduce
// of (global rank + 1) sums over exactly the members; an all_gather of the global ranks returns
// the members in order; a broadcast from the group's rank 1 (or 0) delivers that member's rank;
// and the three groups run interleaved without crosstalk.
DS_WORKER_SCENARIO(axis_collectives) {
  const parallel::RankGrid grid(group.size(), std::stoi(args.at(0)), std::stoi(args.at(1)));
  comm::GroupOptions options;
  options.timeout = std::chrono::milliseconds(worker_timeout_ms());
  if (const char* transport = std::getenv("DS_TEST_TRANSPORT")) {
    options.transport = comm::parse_transport(transport, "DS_TEST_TRANSPORT");
  }
  parallel::ParallelGroups groups = parallel::make_parallel_groups(group, grid, options);
  const int me = group.rank();
  DS_WORKER_EXPECT(groups.coord == grid.coord(me), "coordinate");
  for (int round = 0; round < 3; ++round) {
    for (Axis axis : {Axis::kTensor, Axis::kData, Axis::kPipeline}) {
      comm::Group& g = groups.of(axis);
      const std::vector<int> members = grid.members(axis, me);
      const int n = static_cast<int>(members.size());
      const std::string what =
          std::string(parallel::to_string(axis)) + " axis, round " + std::to_string(round);
      DS_WORKER_EXPECT(g.size() == n, what << ": size " << g.size() << " != " << n);
      DS_WORKER_EXPECT(members.at(g.rank()) == me, what << ": group rank " << g.rank());

      at::Tensor x = at::full({1000}, static_cast<float>(me + 1 + round));
      g.all_reduce(x);
      float want = 0;
      for (int m : members) want += static_cast<float>(m + 1 + round);
      DS_WORKER_EXPECT(at::all(x == want).item<bool>(),
                       what << ": all_reduce gave " << x[0].item<float>() << ", want " << want);

      at::Tensor mine = at::full({2}, static_cast<int64_t>(me), at::kLong);
      at::Tensor all = at::empty({2 * n}, at::kLong);
      g.all_gather(all, mine);
      for (int i = 0; i < n; ++i) {
        DS_WORKER_EXPECT(
            all[2 * i].item<int64_t>() == members[i],
            what << ": all_gather slot " << i << " holds " << all[2 * i].item<int64_t>());
      }

      const int root = n > 1 ? 1 : 0;
      at::Tensor b = at::full({3}, static_cast<double>(me), at::kDouble);
      g.broadcast(b, root);
      DS_WORKER_EXPECT(b[2].item<double>() == members[root], what << ": broadcast");
    }
  }
  // The three axes in flight at once (issued in the same order on every rank).
  at::Tensor t = at::ones({64}), d = at::ones({64}), p = at::ones({64});
  comm::Work wt = groups.tensor->all_reduce_async(t);
  comm::Work wd = groups.data->all_reduce_async(d);
  comm::Work wp = groups.pipeline->all_reduce_async(p);
  wp.wait();
  wd.wait();
  wt.wait();
  DS_WORKER_EXPECT(t[0].item<float>() == grid.tensor_size() &&
                       d[0].item<float>() == grid.data_size() &&
                       p[0].item<float>() == grid.pipeline_size(),
                   "concurrent all_reduces");
  if (me == 0)
    std::printf("grid: %s; transport %s\n", grid.describe().c_str(),
                comm::transport_name(*groups.tensor));
}

}  // namespace
}  // namespace deepshard::testing
