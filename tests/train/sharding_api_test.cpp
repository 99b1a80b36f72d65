// The public sharding API with a model that is not deepshard's, as a user gets it: deepshard is
// installed into a temporary prefix (`cmake --install`), examples/custom_model (TinyLm: a tied
// embedding/head, a frozen positional table, a buffer, residual MLP blocks as units) is configured
// and built against it with find_package(deepshard) (only the example compiles), and trained with
// the installed `deepshard launch` and 2 real ranks at ZeRO stages 0-3 from a DeepSpeed JSON.
// Stages 1-3 (stage 3 built under zero.Init) give the stage-0 losses within 1e-4 for 20 steps; the
// buffer is the same on every rank; the frozen parameter never changes and has no optimizer state
// in the ledger; buffer and frozen parameter survive a checkpoint round trip (into a model built
// with another seed, at another stage too). Also: ranks that run the units in different orders fail
// with the trace comparison's error (tests/workers/sharding_worker.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "support/test_support.h"

namespace deepshard::testing {
namespace sharding_api_test {

constexpr int kRanks = 2;

// The installed deepshard and the example built against it, once for the test binary.
struct Installed {
  TempDir dir;
  std::string prefix = dir.file("prefix");
  std::string build = dir.file("build");
  std::string launcher() const { return prefix + "/bin/deepshard"; }
  std::string example() const { return build + "/custom_model"; }
};

const Installed& installed() {
  static Installed in;
  static const bool built = [] {
    auto step = [](const std::string& what, const std::vector<std::string>& args,
                   const std::map<std::string, std::string>& env = {}) {
      auto r = run_exe("cmake", args, 900, env);
      EXPECT_EQ(r.exit_status, 0) << what << ":\n" << r.output;
    };
    step("install", {"--install", binary_dir(), "--prefix", in.prefix});
    std::vector<std::string> configure = {"-S",
                                          source_dir() + "/examples/custom_model",
                                          "-B",
                                          in.build,
                                          "-G",
                                          "Ninja",
                                          "-DCMAKE_BUILD_TYPE=Release",
                                          "-DCMAKE_PREFIX_PATH=" + in.prefix};
    if (std::filesystem::exists("/usr/bin/ccache"))
      configure.push_back("-DCMAKE_CXX_COMPILER_LAUNCHER=/usr/bin/ccache");
    step("configure the example", configure);
    // ccache: paths under the temporary directory hashed relative to it (hits across runs).
    step("build the example", {"--build", in.build, "-j1"},
         {{"CCACHE_BASEDIR", in.dir.path()}, {"CCACHE_NOHASHDIR", "1"}});
    return true;
  }();
  (void)built;
  return in;
}

std::string ds_config(int stage) {
  return nlohmann::json{
      {"train_micro_batch_size_per_gpu", 4},
      {"gradient_accumulation_steps", 2},
      {"gradient_clipping", 1.0},
      {"optimizer", {{"type", "AdamW"}, {"params", {{"lr", 3e-3}, {"weight_decay", 0.01}}}}},
      {"zero_optimization",
       {{"stage", stage}, {"stage3_param_persistence_threshold", 0}, {"reduce_bucket_size", 2000}}}}
      .dump();
}

struct Report {
  std::vector<nlohmann::json> ranks;
  std::string output;
  std::vector<double> losses() const { return ranks.at(0).at("losses"); }
};

// Runs the example with `args` at `stage`; its per-rank reports.
Report run_example(const TempDir& dir, const std::string& name, int stage,
                   std::vector<std::string> args) {
  const std::string config = dir.file(name + ".json");
  write_file(config, ds_config(stage));
  const std::string report = dir.file(name);
  std::filesystem::create_directories(report);
  std::vector<std::string> full = {"--deepspeed", config, "--report", report};
  full.insert(full.end(), args.begin(), args.end());
  std::vector<std::string> launch = {"launch", "-n", std::to_string(kRanks), "--",
                                     installed().example()};
  launch.insert(launch.end(), full.begin(), full.end());
  auto r = run_exe(installed().launcher(), launch, 300);
  Report out;
  out.output = r.output;
  EXPECT_EQ(r.exit_status, 0) << r.output;
  if (r.exit_status != 0) return out;
  for (int rank = 0; rank < kRanks; ++rank)
    out.ranks.push_back(
        nlohmann::json::parse(read_file(report + "/rank" + std::to_string(rank) + ".json")));
  return out;
}

void expect_module_state_consistent(const Report& r, int stage) {
  ASSERT_EQ(r.ranks.size(), size_t(kRanks)) << r.output;
  int64_t optimizer_elements = 0;
  for (const auto& rank : r.ranks) {
    EXPECT_EQ(rank.at("buffer"), r.ranks[0].at("buffer")) << "stage " << stage;
    EXPECT_EQ(rank.at("frozen_after"), r.ranks[0].at("frozen_before")) << "stage " << stage;
    optimizer_elements += rank.at("optimizer_state_bytes").get<int64_t>() / 8;  // fp32 m and v
  }
  // The optimizer state covers the trainable parameters only (stages 1-3: split over the ranks,
  // with padding below the frozen parameter's size).
  const int64_t trainable = r.ranks[0].at("trainable_numel");
  const int64_t frozen = r.ranks[0].at("frozen_numel");
  if (stage == 0) {
    EXPECT_EQ(optimizer_elements, kRanks * trainable);
  } else {
    EXPECT_GE(optimizer_elements, trainable) << "stage " << stage;
    EXPECT_LT(optimizer_elements, trainable + frozen) << "stage " << stage;
  }
}

TEST(ShardingApi, InstalledCustomModelAtEveryStageEqualsStage0) {
  ASSERT_TRUE(std::filesystem::exists(installed().example())) << "the example was not built";
  TempDir dir;
  const Report ref = run_example(dir, "stage0", 0, {"--steps", "20"});
  ASSERT_EQ(ref.losses().size(), 20u) << ref.output;
  expect_module_state_consistent(ref, 0);
  EXPECT_LT(ref.losses().back(), ref.losses().front() - 0.5) << "the model does not learn";
  for (int stage = 1; stage <= 3; ++stage) {
    const std::string name = "stage" + std::to_string(stage);
    const Report r =
        run_example(dir, name, stage, {"--steps", "20", "--save", dir.file("ckpt" + name)});
    ASSERT_EQ(r.losses().size(), 20u) << r.output;
    expect_module_state_consistent(r, stage);
    double worst = 0;
    for (size_t i = 0; i < 20; ++i) {
      EXPECT_NEAR(r.losses()[i], ref.losses()[i], 1e-4) << "stage " << stage << " step " << i + 1;
      worst = std::max(worst, std::abs(r.losses()[i] - ref.losses()[i]));
    }
    std::printf("stage %d: loss %.4f -> %.4f, largest difference to stage 0 over 20 steps %.2e\n",
                stage, r.losses().front(), r.losses().back(), worst);
  }
  // Round trip: a model built with another seed (other buffer and frozen values) takes them from
  // the checkpoint, at the same stage and at another one.
  for (int stage : {3, 0}) {
    const Report loaded =
        run_example(dir, "load" + std::to_string(stage), stage,
                    {"--steps", "0", "--seed", "77", "--load", dir.file("ckptstage3")});
    ASSERT_EQ(loaded.ranks.size(), size_t(kRanks)) << loaded.output;
    const Report saved = {{nlohmann::json::parse(read_file(dir.file("stage3/rank0.json")))}, ""};
    for (const auto& rank : loaded.ranks) {
      EXPECT_EQ(rank.at("buffer"), saved.ranks[0].at("buffer")) << "loaded at stage " << stage;
      EXPECT_EQ(rank.at("frozen_before"), saved.ranks[0].at("frozen_after"))
          << "loaded at stage " << stage;
    }
  }
}

TEST(ShardingApi, RanksRunningUnitsInAnotherOrderFailFast) {
  const std::string worker = binary_dir() + "/tests/ds_sharding_worker";
  auto r = run_ranks(kRanks, worker, {"divergent_order"}, 120);
  EXPECT_EQ(r.exit_status, 0) << r.output;
}

}  // namespace sharding_api_test
}  // namespace deepshard::testing
