// Implementation of RankOutput. Each feed() writes its complete lines with one fwrite, so lines
// stay whole; a line longer than kMaxLineBytes is cut there, so that a rank that never prints a
// newline cannot make the launcher buffer without bound.
#include "launch/rank_output.h"

namespace deepshard::launch {
namespace {
constexpr size_t kMaxLineBytes = 1 << 20;
}

RankOutput::RankOutput(int rank, std::FILE* sink, size_t tail_lines)
    : prefix_("[rank " + std::to_string(rank) + "] "), sink_(sink), tail_lines_(tail_lines) {}

void RankOutput::emit(std::string_view line, std::string& batch) {
  // deepshard's own log lines already carry the prefix (util/log): one is enough.
  if (line.substr(0, prefix_.size()) == prefix_) line.remove_prefix(prefix_.size());
  batch.append(prefix_).append(line).push_back('\n');
  tail_.emplace_back(line);
  if (tail_.size() > tail_lines_) tail_.pop_front();
}

void RankOutput::feed(std::string_view data) {
  partial_.append(data);
  std::string batch;
  size_t start = 0;
  while (true) {
    size_t newline = partial_.find('\n', start);
    if (newline == std::string::npos) {
      if (partial_.size() - start < kMaxLineBytes) break;
      newline = start + kMaxLineBytes;
      emit(std::string_view(partial_).substr(start, kMaxLineBytes), batch);
      start = newline;
      continue;
    }
    emit(std::string_view(partial_).substr(start, newline - start), batch);
    start = newline + 1;
  }
  partial_.erase(0, start);
  if (!batch.empty()) {
    std::fwrite(batch.data(), 1, batch.size(), sink_);
    std::fflush(sink_);
  }
}

void RankOutput::finish() {
  if (partial_.empty()) return;
  feed("\n");
}

}  // namespace deepshard::launch
