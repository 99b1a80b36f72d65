// The comms logger's arithmetic and table: DeepSpeed's bandwidth formulas, sizes, trimmed means,
// and the per-size detail the comm log keeps.
#include "comm/comms_logger.h"

#include <gtest/gtest.h>

namespace deepshard::comm {
namespace comms_logger_test {

TEST(CommsLogger, BandwidthFollowsNcclTestsFormulas) {
  // 1 GB in one second is 8 Gbps of algorithm bandwidth for a broadcast.
  auto [alg, bus] = bandwidth_gbps("broadcast", 1'000'000'000, 1.0, 4);
  EXPECT_DOUBLE_EQ(alg, 8.0);
  EXPECT_DOUBLE_EQ(bus, 8.0);
  std::tie(alg, bus) = bandwidth_gbps("all_reduce", 1'000'000'000, 1.0, 4);
  EXPECT_DOUBLE_EQ(alg, 16.0);
  EXPECT_DOUBLE_EQ(bus, 8.0 * 2 * 3 / 4);
  // all_gather and reduce_scatter: the size is the whole buffer, world_size times a rank's part.
  std::tie(alg, bus) = bandwidth_gbps("all_gather", 250'000'000, 1.0, 4);
  EXPECT_DOUBLE_EQ(alg, 8.0);
  EXPECT_DOUBLE_EQ(bus, 6.0);
  EXPECT_EQ(bandwidth_gbps("reduce_scatter", 1, 0.0, 2), std::make_pair(0.0, 0.0));
}

TEST(CommsLogger, SizesAndTrimmedMeanAsDeepSpeedPrintsThem) {
  EXPECT_EQ(convert_size(0), "0B");
  EXPECT_EQ(convert_size(512), "512.0 B");
  EXPECT_EQ(convert_size(1536), "1.5 KB");
  EXPECT_EQ(convert_size(3932160), "3.75 MB");
  EXPECT_DOUBLE_EQ(trim_mean({1, 2, 3}), 2.0);
  // 10 values: one trimmed from each end.
  EXPECT_DOUBLE_EQ(trim_mean({100, 1, 1, 1, 1, 1, 1, 1, 1, 0}), 1.0);
  EXPECT_DOUBLE_EQ(trim_mean({}), 0.0);
}

TEST(CommsLogger, TableFromTheCommLogsDetail) {
  CommLog log;
  log.record("all_reduce", 1024, 0.5, 0.5);  // before keep_detail: counted, not detailed
  log.keep_detail(true);
  log.record("all_reduce", 4096, 0.002, 0.001);
  log.record("all_reduce", 4096, 0.004, 0.001);
  log.record("all_gather", 1024, 0.001, 0.0);
  const CommDetail before = log.detail();
  log.record("all_gather", 1024, 0.003, 0.0);
  const CommDetail detail = log.detail();
  ASSERT_EQ(detail.at("all_reduce").size(), 1u);
  EXPECT_EQ(detail.at("all_reduce").at(4096).count, 2);
  EXPECT_EQ(detail.at("all_reduce").at(4096).bytes, 8192);
  EXPECT_EQ(log.snapshot().at("all_reduce").bytes, 1024 + 8192);
  const std::string table = format_comms_summary(detail, 2);
  EXPECT_EQ(table.substr(0, 40), "Comm. Op            Message Size        ");
  EXPECT_NE(table.find("all_reduce\n                    4.0 KB              2                   "
                       "6.00                3.00                "),
            std::string::npos)
      << table;
  CommsLoggerOptions only_gather;
  only_gather.prof_all = false;
  only_gather.prof_ops = {"all_gather"};
  EXPECT_EQ(format_comms_summary(detail, 2, only_gather).find("all_reduce"), std::string::npos);
  const CommDetail step = detail_since(detail, before);
  ASSERT_EQ(step.size(), 1u);
  EXPECT_EQ(step.at("all_gather").at(1024).count, 1);
  EXPECT_EQ(step.at("all_gather").at(1024).latencies, std::vector<double>{0.003});
}

}  // namespace comms_logger_test
}  // namespace deepshard::comm
