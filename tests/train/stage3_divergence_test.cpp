// ZeRO-3's divergence check: when one rank runs the units in another order (here rank 1 runs the
// GPT blocks in reverse, DEEPSHARD_TEST_REVERSE_BLOCKS_RANK), the comparison of the recorded
// traces after the first backward stops every rank with an error naming the first differing
// position, the units and the rank, well within the (long) communication timeout: no hang.
#include <gtest/gtest.h>

#include <chrono>

#include "support/test_support.h"
#include "train/run_helpers.h"

namespace deepshard::testing {
namespace {

TEST(Stage3Divergence, ARankRunningAnotherOrderFailsFast) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  const std::string config = dir.file("run.json");
  write_file(config, tiny_run_config(data, dir.file("run"), 4, 1, 20,
                                     R"({"zero_optimization": {"stage": 3},
                                         "comm": {"timeout_s": 600}})"));
  const auto t0 = std::chrono::steady_clock::now();
  auto r = run_ranks(2, deepshard_exe(), {"train", "--config", config}, 120,
                     {{"DEEPSHARD_TEST_REVERSE_BLOCKS_RANK", "1"}});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(r.exit_status, 0) << r.output;
  EXPECT_LT(seconds, 60.0) << r.output;
  EXPECT_NE(r.output.find("the ranks ran different unit sequences: at position 0 rank 0 fetched "
                          "h.0 but rank 1 fetched h.1"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace deepshard::testing
