// A rank that dies mid-training must not leave the job hanging: under the launcher, rank 1 fails
// at step 3 while rank 0 waits in a collective (with a long comm timeout); every rank is gone and
// the launcher exits non-zero within 30 s, naming the rank and its error.
#include <gtest/gtest.h>

#include <chrono>

#include "support/test_support.h"
#include "train/run_helpers.h"
#include "util/stopwatch.h"

namespace deepshard::testing {
namespace rank_failure_test {

TEST(RankFailure, LauncherStopsEveryRankAndNamesTheFailedOne) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  const std::string config = dir.file("run.json");
  write_file(config,
             tiny_run_config(data, dir.file("run"), 4, 1, 20, R"({"comm": {"timeout_s": 600}})"));
  const auto t0 = std::chrono::steady_clock::now();
  auto r = run_ranks(2, faults_exe(), {"train", "--config", config}, 120,
                     {{"DEEPSHARD_TEST_FAIL_AT_STEP", "3"}, {"DEEPSHARD_TEST_FAIL_RANK", "1"}});
  const double seconds = util::seconds_since(t0);
  EXPECT_NE(r.exit_status, 0) << r.output;
  EXPECT_LT(seconds, 30.0) << r.output;
  EXPECT_NE(r.output.find("rank 1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("injected failure at step 3"), std::string::npos) << r.output;
}

}  // namespace rank_failure_test
}  // namespace deepshard::testing
