// DeepSpeed's csv_monitor (deepspeed/monitor/csv_monitor.py): under log_dir = output_path/job_name,
// one CSV file per tag, named after the tag with '/' and ' ' replaced by '_' (Train/Samples/lr ->
// Train_Samples_lr.csv), a header row "step,<last part of the tag>" and one row "step,value" per
// event. Files are appended to; a file that already has content (a resumed run) gets no second
// header. Buffered: flush() makes the rows visible.
#pragma once

#include <cstdio>
#include <map>
#include <string>

#include "monitor/monitor.h"

namespace deepshard::monitor {

class CsvMonitor : public Monitor {
 public:
  // Creates `log_dir`. Throws IoError naming it.
  explicit CsvMonitor(const std::string& log_dir);
  ~CsvMonitor() override;
  CsvMonitor(const CsvMonitor&) = delete;
  CsvMonitor& operator=(const CsvMonitor&) = delete;

  void write_events(const std::vector<ScalarEvent>& events) override;
  void flush() override;

  static std::string file_name(const std::string& tag);  // without the directory
  // A value as Python's str(float) writes it (shortest round-trip form, "1.0" not "1").
  static std::string format_value(double value);

 private:
  FILE* file_for(const std::string& tag);

  std::string log_dir_;
  std::map<std::string, FILE*> files_;  // by file name
};

}  // namespace deepshard::monitor
