// Per-axis communicators with real ranks (tests/workers/parallel_worker.cpp): 4 ranks as
// tensor 2 x data 2 and as tensor 2 x pipeline 2, over Gloo and over shared memory.
#include <gtest/gtest.h>

#include "support/test_support.h"

namespace deepshard {
namespace process_groups_test {

std::string worker() { return testing::binary_dir() + "/tests/ds_parallel_worker"; }

struct Layout {
  const char* transport;
  int pipeline;
  int tensor;
};

class AxisCollectives : public ::testing::TestWithParam<Layout> {};

TEST_P(AxisCollectives, EveryAxisReducesOverExactlyItsMembers) {
  const Layout layout = GetParam();
  auto r = testing::run_ranks(
      4, worker(),
      {"axis_collectives", std::to_string(layout.pipeline), std::to_string(layout.tensor)}, 180,
      {{"DS_TEST_TRANSPORT", layout.transport}});
  ASSERT_EQ(r.exit_status, 0) << r.output;
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_NE(r.output.find("[rank " + std::to_string(rank) +
                            "] scenario axis_collectives passed on rank " + std::to_string(rank)),
              std::string::npos)
        << r.output;
  }
  EXPECT_NE(r.output.find(std::string("transport ") + layout.transport), std::string::npos)
      << r.output;
}

INSTANTIATE_TEST_SUITE_P(Grids, AxisCollectives,
                         ::testing::Values(Layout{"gloo", 1, 2}, Layout{"shm", 1, 2},
                                           Layout{"shm", 2, 2}),
                         [](const ::testing::TestParamInfo<Layout>& info) {
                           return std::string(info.param.transport) + "_pp" +
                                  std::to_string(info.param.pipeline) + "_tp" +
                                  std::to_string(info.param.tensor);
                         });

}  // namespace process_groups_test
}  // namespace deepshard
