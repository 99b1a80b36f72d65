// `deepshard train` run directly (no launcher) on a machine where OpenBLAS reports its generic
// `Prescott` core (detection stubbed by preloading tests/support/fake_openblas_core.cpp, and
// OPENBLAS_CORETYPE removed from the environment): the process re-executes itself once with the
// OPENBLAS_CORETYPE matching the CPU, checks those kernels numerically, and trains with them
// (summary.json records the environment the rank ran with). The same under `deepshard launch -n 2`
// (as scripts/demo.sh runs it): the ranks get the variable from the launcher. A value the user set
// is kept.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "platform/blas_kernels.h"
#include "support/test_support.h"
#include "train/run_helpers.h"

namespace deepshard::testing {
namespace blas_reexec_test {

TEST(BlasReexec, TrainRunDirectlyOnAGenericCoreRunsWithTheMatchingKernels) {
  TempDir dir;
  const std::string data = make_token_file(dir);
  const std::string config = dir.file("run.json");
  write_file(config, tiny_run_config(data, dir.file("run"), 2, 1, 2));
  const auto r = run_exe("/usr/bin/env",
                         {"-u", "OPENBLAS_CORETYPE", "-u", platform::kAutoCoretypeVar,
                          std::string("LD_PRELOAD=") + DS_FAKE_OPENBLAS_CORE, deepshard_exe(),
                          "train", "--config", config},
                         180);
  ASSERT_EQ(r.exit_status, 0) << r.output;
  const std::string expected = platform::matching_openblas_coretype(platform::detect_cpu());
  const auto summary = nlohmann::json::parse(read_file(dir.file("run") + "/summary.json"));
  const auto& blas = summary.at("platform");
  EXPECT_EQ(blas.at("openblas_coretype").get<std::string>(), expected) << r.output;
  if (!expected.empty()) {
    EXPECT_NE(r.output.find("OPENBLAS_CORETYPE=" + expected + " chosen by deepshard"),
              std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("verified numerically"), std::string::npos) << r.output;
  }
}

// `deepshard launch -n 2 -- deepshard train` (scripts/demo.sh's command) with the detection
// stubbed to Prescott in the launcher and in the ranks: rank 0 trains with the matching
// OPENBLAS_CORETYPE, checked numerically; `user_coretype` (when given) is kept instead.
nlohmann::json launched_run_platform(const TempDir& dir, const std::string& name,
                                     const char* user_coretype, std::string* output) {
  const std::string data = make_token_file(dir);
  const std::string config = dir.file(name + ".json");
  write_file(config, tiny_run_config(data, dir.file(name), 2, 1, 2));
  std::vector<std::string> args = {"-u", "OPENBLAS_CORETYPE", "-u", platform::kAutoCoretypeVar,
                                   std::string("LD_PRELOAD=") + DS_FAKE_OPENBLAS_CORE};
  if (user_coretype) args.push_back(std::string("OPENBLAS_CORETYPE=") + user_coretype);
  for (const std::string& a :
       {deepshard_exe(), std::string("launch"), std::string("-n"), std::string("2"),
        std::string("--"), deepshard_exe(), std::string("train"), std::string("--config"), config})
    args.push_back(a);
  const auto r = run_exe("/usr/bin/env", args, 240);
  *output = r.output;
  EXPECT_EQ(r.exit_status, 0) << r.output;
  return nlohmann::json::parse(read_file(dir.file(name) + "/summary.json")).at("platform");
}

TEST(BlasReexec, LaunchedRanksOfAGenericCoreTrainWithTheMatchingKernels) {
  TempDir dir;
  std::string out;
  const auto platform = launched_run_platform(dir, "run", nullptr, &out);
  const std::string expected = platform::matching_openblas_coretype(platform::detect_cpu());
  EXPECT_EQ(platform.at("openblas_core").get<std::string>(), "Prescott") << out;
  EXPECT_EQ(platform.at("openblas_coretype").get<std::string>(), expected) << out;
  if (!expected.empty()) {
    EXPECT_NE(out.find("generic core Prescott"), std::string::npos) << out;  // the launcher's line
    EXPECT_NE(out.find("OPENBLAS_CORETYPE=" + expected + " chosen by deepshard"), std::string::npos)
        << out;
    EXPECT_NE(out.find("verified numerically"), std::string::npos) << out;
  }
}

TEST(BlasReexec, ACoretypeTheUserSetIsKeptByLaunchAndTrain) {
  TempDir dir;
  std::string out;
  const auto platform = launched_run_platform(dir, "run", "Haswell", &out);
  EXPECT_EQ(platform.at("openblas_coretype").get<std::string>(), "Haswell") << out;
  EXPECT_NE(platform.at("blas").get<std::string>().find("set in the environment (kept)"),
            std::string::npos)
      << platform.dump();
}

}  // namespace blas_reexec_test
}  // namespace deepshard::testing
