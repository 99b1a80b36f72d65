// Multi-rank scenarios for ZeRO internals that need real ranks, run by tests/train tests:
// FetchCheck (every unit gather compared across ranks).
#include <ATen/ATen.h>

#include <string>

#include "workers/worker.h"
#include "zero/stage3/fetch_check.h"

namespace deepshard::testing {
namespace {

// Gathers unit u of 4 (a real all-gather of u-filled slices) under the check.
void checked_gather(zero::FetchCheck& check, comm::Group& group, size_t u) {
  at::Tensor in = at::full({8}, double(u), at::kFloat);
  at::Tensor out = at::empty({8 * group.size()}, at::kFloat);
  check.start(group, u);
  group.all_gather_async(out, in).wait();
  check.finish(u);
}

// args[0]: the gather index at which the last rank fetches another unit ("-1": never). Three
// passes over units 1,2,3,1 (a trace); the departing rank gathers unit 2 instead of the expected
// one. Every rank must fail there with the error naming the gather, both units and the rank.
DS_WORKER_SCENARIO(fetch_check) {
  const int depart_at = std::stoi(args.at(0));
  zero::FetchCheck check({"root", "h.0", "h.1", "h.2"});
  const std::vector<size_t> pass = {1, 2, 3, 1};
  int index = 0;
  try {
    for (int p = 0; p < 3; ++p) {
      for (size_t u : pass) {
        const bool depart = index == depart_at && group.rank() == group.size() - 1;
        checked_gather(check, group, depart ? (u == 2 ? 3 : 2) : u);
        ++index;
      }
    }
  } catch (const std::exception& e) {
    std::printf("rank %d: %s\n", group.rank(), e.what());
    DS_WORKER_EXPECT(depart_at >= 0, "unexpected error");
    const std::string m = e.what();
    DS_WORKER_EXPECT(
        m.find("ZeRO-3: the ranks' unit sequences differ: gather #" + std::to_string(depart_at) +
               " is unit ") != std::string::npos &&
            m.find(" on rank " + std::to_string(group.size() - 1)) != std::string::npos,
        m);
    DS_WORKER_EXPECT(index == depart_at, "failed at gather " << index);
    return;
  }
  DS_WORKER_EXPECT(depart_at < 0, "the departure at gather " << depart_at << " was not caught");
  DS_WORKER_EXPECT(check.gathers() == 12u, check.gathers());
}

}  // namespace
}  // namespace deepshard::testing
