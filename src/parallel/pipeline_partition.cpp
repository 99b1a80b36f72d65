// The uniform and parameter-balanced splits of a model's layers over pipeline stages
// (pipeline_partition.h).
#include "deepshard/parallel/pipeline_partition.h"

#include <algorithm>
#include <limits>
#include <sstream>

#include "deepshard/util/error.h"

namespace deepshard::parallel {

PartitionMethod parse_partition_method(const std::string& text) {
  if (text == "uniform") return PartitionMethod::kUniform;
  if (text == "parameters") return PartitionMethod::kParameters;
  throw ConfigError(detail::concat("pipeline.partition_method: \"", text,
                                   "\" is not supported (use \"uniform\" or \"parameters\")"));
}

const char* to_string(PartitionMethod method) {
  return method == PartitionMethod::kUniform ? "uniform" : "parameters";
}

std::string StagePartition::describe() const {
  std::ostringstream os;
  for (int s = 0; s < stages(); ++s) {
    if (s > 0) os << "; ";
    os << "stage " << s << ":";
    const char* sep = " ";
    if (s == 0) {
      os << sep << "embedding";
      sep = " + ";
    }
    if (end(s) > begin(s)) {
      os << sep << "blocks " << begin(s) << "-" << end(s) - 1;
      sep = " + ";
    }
    if (s == stages() - 1) os << sep << "head";
  }
  return os.str();
}

StagePartition partition_uniform(int64_t blocks, int stages) {
  DS_CHECK(stages >= 1, ConfigError, "pipeline.stages: ", stages, " must be at least 1");
  DS_CHECK(blocks >= stages, ConfigError, "pipeline.stages: ", stages, " stages for a model of ",
           blocks, " layers (partition_method \"uniform\" gives every stage at least one layer)");
  StagePartition p;
  const int64_t chunk = blocks / stages, residual = blocks % stages;
  p.block_begin.push_back(0);
  for (int s = 0; s < stages; ++s) {
    p.block_begin.push_back(p.block_begin.back() + chunk + (s < residual ? 1 : 0));
  }
  return p;
}

StagePartition partition_parameters(int64_t embedding, const std::vector<int64_t>& blocks,
                                    int64_t head, int stages) {
  std::vector<int64_t> w;
  w.push_back(embedding);
  w.insert(w.end(), blocks.begin(), blocks.end());
  w.push_back(head);
  const int n = static_cast<int>(w.size());
  DS_CHECK(stages >= 1, ConfigError, "pipeline.stages: ", stages, " must be at least 1");
  DS_CHECK(n >= stages, ConfigError, "pipeline.stages: ", stages, " stages for a model of ",
           blocks.size(), " layers plus embedding and head (partition_method \"parameters\")");
  std::vector<int64_t> prefix(n + 1, 0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + w[i];
  auto sum = [&](int a, int b) { return prefix[b] - prefix[a]; };  // items [a, b)
  // best[k][i]: the smallest bottleneck of items [0, i) in k non-empty parts.
  constexpr int64_t kInf = std::numeric_limits<int64_t>::max();
  std::vector<std::vector<int64_t>> best(stages + 1, std::vector<int64_t>(n + 1, kInf));
  best[0][0] = 0;
  for (int k = 1; k <= stages; ++k) {
    for (int i = k; i <= n; ++i) {
      for (int j = k - 1; j < i; ++j) {
        if (best[k - 1][j] == kInf) continue;
        best[k][i] = std::min(best[k][i], std::max(best[k - 1][j], sum(j, i)));
      }
    }
  }
  const int64_t bottleneck = best[stages][n];
  // Greedy: each part takes as many items as fit under the bottleneck while leaving one item for
  // every later part. Item boundaries -> block boundaries (item i + 1 is block i).
  std::vector<int> item_begin{0};
  for (int s = 1; s < stages; ++s) {
    int end = item_begin.back() + 1;
    while (end < n - (stages - s) && sum(item_begin.back(), end + 1) <= bottleneck) ++end;
    item_begin.push_back(end);
  }
  item_begin.push_back(n);
  DS_ASSERT(sum(item_begin[stages - 1], n) <= bottleneck, "balanced partition overflows");
  StagePartition p;
  const int64_t nblocks = static_cast<int64_t>(blocks.size());
  for (int b : item_begin) p.block_begin.push_back(std::clamp<int64_t>(b - 1, 0, nblocks));
  return p;
}

}  // namespace deepshard::parallel
