// Tests of SubGroupSwapper (sub_group_swapper.h): the pipelined read -> update -> write loop gives
// the same arrays as updating them in memory, for every buffer count and pipeline setting; RAM held
// is the buffers'; a failed write is an IoError naming the file; files go at exit.
#include "offload/sub_group_swapper.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "deepshard/util/error.h"
#include "support/test_support.h"

namespace deepshard::offload {
namespace sub_group_swapper_test {

using deepshard::testing::TempDir;

TEST(SplitSubGroups, CoversTheArrayInPiecesOfAtMostTheSize) {
  auto g = split_sub_groups(10, 4);
  ASSERT_EQ(g.size(), 3u);
  EXPECT_EQ(g[0].offset, 0);
  EXPECT_EQ(g[2].offset, 8);
  EXPECT_EQ(g[2].numel, 2);
  EXPECT_TRUE(split_sub_groups(0, 4).empty());
  EXPECT_THROW(split_sub_groups(10, 0), ConfigError);
}

TEST(SubGroupSwapper, ThreeStepsEqualTheInMemoryUpdateForEveryBufferCountAndPipeline) {
  TempDir root;
  const int64_t numel = 10'000;  // sub-groups of 1500: 7 groups, the last shorter
  const auto groups = split_sub_groups(numel, 1500);
  for (int64_t buffers : {1, 3, 6, 9}) {
    for (int pipe = 0; pipe < 4; ++pipe) {
      SwapOptions o;
      o.nvme_path = root.path();
      o.run = "t";
      o.buffer_count = buffers;
      o.pipeline_read = pipe & 1;
      o.pipeline_write = pipe & 2;
      o.aio.block_size = 8192;
      std::vector<float> ref0(numel), ref1(numel), ref2(numel);
      {
        SubGroupSwapper swapper(groups, 3, o);
        EXPECT_EQ(swapper.held_bytes(), SubGroupSwapper::buffer_bytes(groups, 3, buffers));
        EXPECT_LE(swapper.held_bytes(), std::max<int64_t>(buffers, 3) * 8192);
        swapper.initialize([&](size_t, const SubGroup& g, float* const* a) {
          for (int64_t i = 0; i < g.numel; ++i) {
            const int64_t e = g.offset + i;
            ref0[e] = a[0][i] = 0.5f * e;
            ref1[e] = a[1][i] = 0.0f;
            ref2[e] = a[2][i] = 1.0f;
          }
        });
        for (int step = 1; step <= 3; ++step) {
          swapper.for_each([&](size_t, const SubGroup& g, float* const* a) {
            for (int64_t i = 0; i < g.numel; ++i) {
              a[1][i] = 0.9f * a[1][i] + a[0][i];
              a[2][i] = a[2][i] * 1.5f + step;
              a[0][i] -= 0.01f * a[1][i] / a[2][i];
            }
          });
          for (int64_t e = 0; e < numel; ++e) {
            ref1[e] = 0.9f * ref1[e] + ref0[e];
            ref2[e] = ref2[e] * 1.5f + step;
            ref0[e] -= 0.01f * ref1[e] / ref2[e];
          }
        }
        int64_t mismatches = 0;
        swapper.read_each([&](size_t, const SubGroup& g, float* const* a) {
          for (int64_t i = 0; i < g.numel; ++i) {
            const int64_t e = g.offset + i;
            mismatches += a[0][i] != ref0[e] || a[1][i] != ref1[e] || a[2][i] != ref2[e];
          }
        });
        EXPECT_EQ(mismatches, 0) << "buffer_count " << buffers << " pipeline " << pipe;
      }
      EXPECT_FALSE(std::filesystem::exists(root.path() + "/t")) << "swap files left behind";
    }
  }
}

TEST(SubGroupSwapper, AFailedWriteIsAnIoErrorNamingTheFile) {
  TempDir root;
  SwapOptions o;
  o.nvme_path = root.path();
  o.run = "t";
  o.pipeline_read = o.pipeline_write = true;
  o.buffer_count = 6;
  bool armed = false;
  o.aio.fault = [&](io::IoOp op, const std::string& path, int64_t) {
    return armed && op == io::IoOp::kWrite && path.find("subgroup3") != std::string::npos ? ENOSPC
                                                                                          : 0;
  };
  SubGroupSwapper swapper(split_sub_groups(8192, 1024), 2, o);
  swapper.initialize([](size_t, const SubGroup&, float* const*) {});
  armed = true;
  try {
    swapper.for_each([](size_t, const SubGroup&, float* const* a) { a[0][0] += 1; });
    FAIL() << "the failed write was not reported";
  } catch (const IoError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(swapper.folder() + "/optimizer_subgroup3.swp"), std::string::npos) << what;
    EXPECT_NE(what.find(std::strerror(ENOSPC)), std::string::npos) << what;
  }
}

}  // namespace sub_group_swapper_test
}  // namespace deepshard::offload
