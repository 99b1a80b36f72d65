// ZeRO-3's fetch check (src/zero/stage3/fetch_check.h) on every unit gather, not only on the pass
// that records the trace: 3 real ranks run three passes over units 1,2,3,1 and the last rank
// departs at gather K (K = -1: never); every rank must fail at exactly gather K with the error
// naming the gather, both units and the rank. The first-pass case with a real model (rank 1 running
// its units in reverse) is ShardingApi.RanksRunningUnitsInAnotherOrderFailFast.
#include <gtest/gtest.h>

#include "support/test_support.h"

namespace deepshard::testing {
namespace fetch_check_test {

TEST(FetchCheck, EveryGatherIsCheckedAfterTheTraceToo) {
  const std::string worker = binary_dir() + "/tests/ds_zero_worker";
  for (const char* depart_at : {"-1", "1", "6", "11"}) {
    auto r = run_ranks(3, worker, {"fetch_check", depart_at}, 120);
    EXPECT_EQ(r.exit_status, 0) << "departure at gather " << depart_at << "\n" << r.output;
  }
}

}  // namespace fetch_check_test
}  // namespace deepshard::testing
