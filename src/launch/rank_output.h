// One rank's output as the launcher relays it: bytes in, whole lines out with a "[rank R] " prefix
// (a line is never split or mixed with another rank's; a line that starts with the prefix already,
// as deepshard's log lines do, keeps its one), and the last lines kept for the failure report.
#pragma once

#include <cstdio>
#include <deque>
#include <string>
#include <string_view>

namespace deepshard::launch {

class RankOutput {
 public:
  RankOutput(int rank, std::FILE* sink, size_t tail_lines = 20);

  // Writes every complete line of `data` (with what was buffered before) to the sink.
  void feed(std::string_view data);
  // Writes a final line without a newline, if any.
  void finish();
  // The last lines written, oldest first.
  const std::deque<std::string>& tail() const { return tail_; }

 private:
  void emit(std::string_view line, std::string& batch);

  std::string prefix_;
  std::FILE* sink_;
  size_t tail_lines_;
  std::string partial_;  // bytes after the last newline
  std::deque<std::string> tail_;
};

}  // namespace deepshard::launch
