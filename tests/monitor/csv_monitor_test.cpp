// csv_monitor: DeepSpeed's file names, header and rows.
#include "monitor/csv_monitor.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "support/test_support.h"

namespace deepshard::monitor {
namespace csv_monitor_test {

TEST(CsvMonitor, OneFilePerTagNamedAsDeepSpeedDoes) {
  EXPECT_EQ(CsvMonitor::file_name("Train/Samples/train_loss"), "Train_Samples_train_loss.csv");
  EXPECT_EQ(CsvMonitor::file_name("a b/c"), "a_b_c.csv");
  EXPECT_EQ(CsvMonitor::format_value(1.0), "1.0");
  EXPECT_EQ(CsvMonitor::format_value(0.1), "0.1");
  EXPECT_EQ(CsvMonitor::format_value(2.5e-05), "2.5e-05");
  EXPECT_EQ(CsvMonitor::format_value(-3.25), "-3.25");
}

TEST(CsvMonitor, HeaderOnceThenStepValueRows) {
  testing::TempDir dir;
  const std::string log_dir = dir.file("out/job");
  {
    CsvMonitor csv(log_dir);
    csv.write_events({{"Train/Samples/train_loss", 2.5, 16}, {"Train/Samples/lr", 0.001, 16}});
    csv.write_events({{"Train/Samples/train_loss", 2.0, 32}});
    csv.flush();
    EXPECT_EQ(testing::read_file(log_dir + "/Train_Samples_train_loss.csv"),
              "step,train_loss\r\n16,2.5\r\n32,2.0\r\n");
  }
  {  // a resumed run appends without a second header
    CsvMonitor csv(log_dir);
    csv.write_events({{"Train/Samples/train_loss", 1.75, 48}});
  }
  EXPECT_EQ(testing::read_file(log_dir + "/Train_Samples_train_loss.csv"),
            "step,train_loss\r\n16,2.5\r\n32,2.0\r\n48,1.75\r\n");
  EXPECT_EQ(testing::read_file(log_dir + "/Train_Samples_lr.csv"), "step,lr\r\n16,0.001\r\n");
}

}  // namespace csv_monitor_test
}  // namespace deepshard::monitor
