// DeepSpeed's partition methods over a pipeline's layer specs: uniform, balanced by parameter
// count, balanced over the layers of a type (pipeline_partition.h).
#include "parallel/pipeline_partition.h"

#include <algorithm>
#include <limits>
#include <regex>
#include <sstream>

#include "deepshard/config/parallel_config.h"
#include "deepshard/util/error.h"

namespace deepshard::parallel {
namespace {

std::regex compile_type(const std::string& regex, const std::string& key) {
  try {
    return std::regex(regex, std::regex::ECMAScript | std::regex::icase);
  } catch (const std::regex_error& e) {
    throw ConfigError(detail::concat(key, ": \"type:", regex,
                                     "\" is not a valid regular expression (", e.what(), ")"));
  }
}

}  // namespace

PartitionMethod parse_partition_method(const std::string& text, const std::string& key) {
  std::string method;
  const std::string problem = config::read_partition_method(text, method);
  DS_CHECK(problem.empty(), ConfigError, key, ": ", problem);
  if (method == "uniform") return PartitionMethod::kUniform;
  if (method == "parameters") return PartitionMethod::kParameters;
  return PartitionMethod::type(method.substr(5));  // "type:<regex>"
}

std::string to_string(const PartitionMethod& method) {
  switch (method.kind) {
    case PartitionMethod::Kind::kUniform:
      return "uniform";
    case PartitionMethod::Kind::kParameters:
      return "parameters";
    case PartitionMethod::Kind::kType:
      break;
  }
  return "type:" + method.type_regex;
}

std::vector<int64_t> uniform_boundaries(int64_t items, int64_t parts) {
  DS_CHECK(parts >= 1 && items >= 0, ConfigError, "pipeline.stages: ", parts, " parts of ", items,
           " items");
  std::vector<int64_t> b(size_t(parts + 1), 0);
  if (items <= parts) {
    for (int64_t p = 0; p <= parts; ++p) b[size_t(p)] = std::min(p, items);
    return b;
  }
  const int64_t chunk = items / parts, residual = items % parts;
  for (int64_t p = 1; p <= parts; ++p) b[size_t(p)] = b[size_t(p - 1)] + chunk + (p <= residual);
  return b;
}

std::vector<int64_t> balanced_boundaries(const std::vector<int64_t>& weights, int64_t parts) {
  const int64_t n = static_cast<int64_t>(weights.size());
  if (n <= parts) return uniform_boundaries(n, parts);
  // For the first i items in j parts: the chosen split's heaviest and lightest part, their
  // difference (the cost minimised; infinite: no split yet) and where its last part starts. Sums
  // in double, as DeepSpeed's numpy arrays hold them; a part's lightest over no parts is infinite.
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const size_t cols = size_t(parts + 1);
  std::vector<double> most(size_t(n + 1) * cols, kInf), least(most), cost(most);
  std::vector<int64_t> start(size_t(n + 1) * cols, 0);
  auto at = [cols](int64_t i, int64_t j) { return size_t(i) * cols + size_t(j); };
  std::vector<double> prefix(size_t(n + 1), 0.0);
  int64_t running = 0;
  for (int64_t i = 0; i < n; ++i)
    prefix[size_t(i + 1)] = static_cast<double>(running += weights[size_t(i)]);
  most[at(0, 0)] = 0;
  cost[at(0, 0)] = 0;
  for (int64_t i = 1; i <= n; ++i) {
    for (int64_t j = 1; j <= std::min(i, parts); ++j) {
      for (int64_t k = 0; k < i; ++k) {
        const double part = prefix[size_t(i)] - prefix[size_t(k)];
        const double hi = std::max(most[at(k, j - 1)], part);
        const double lo = std::min(least[at(k, j - 1)], part);
        // Not-yet-reachable states give an infinite cost, which a later finite one replaces; of
        // equal costs the latest k wins.
        if (cost[at(i, j)] >= hi - lo) {
          cost[at(i, j)] = hi - lo;
          most[at(i, j)] = hi;
          least[at(i, j)] = lo;
          start[at(i, j)] = k;
        }
      }
    }
  }
  std::vector<int64_t> b(size_t(parts + 1));
  b[size_t(parts)] = n;
  for (int64_t j = parts; j >= 1; --j) b[size_t(j - 1)] = start[at(b[size_t(j)], j)];
  return b;
}

std::vector<int64_t> type_weights(const std::vector<std::string>& names, const std::string& regex,
                                  const std::string& key) {
  const std::regex re = compile_type(regex, key);
  std::vector<int64_t> w;
  int64_t matches = 0;
  for (const std::string& name : names) {
    w.push_back(std::regex_search(name, re) ? 1 : 0);
    matches += w.back();
  }
  if (matches == 0) {
    std::vector<std::string> distinct;
    for (const std::string& name : names) {
      if (std::find(distinct.begin(), distinct.end(), name) == distinct.end())
        distinct.push_back(name);
    }
    std::string all;
    for (const std::string& name : distinct) all += (all.empty() ? "" : ", ") + name;
    throw ConfigError(detail::concat(key, ": \"type:", regex,
                                     "\" matches none of the model's layer types (", all, ")"));
  }
  return w;
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

StagePartition partition_items(const PipelineItems& items, const PartitionMethod& method,
                               int stages) {
  const int64_t n = static_cast<int64_t>(items.types.size());
  DS_ASSERT(n >= 2 && items.params.size() == items.types.size(), "pipeline items: ", n,
            " types and ", items.params.size(), " counts");
  DS_CHECK(stages >= 1, ConfigError, "pipeline.stages: ", stages, " must be at least 1");
  DS_CHECK(n >= stages, ConfigError, "pipeline.stages: ", stages, " stages for a model of ",
           items.blocks(), " layers plus embedding and head (", n,
           " layer specs; every stage holds at least one)");
  std::vector<int64_t> b;
  switch (method.kind) {
    case PartitionMethod::Kind::kUniform:
      b = uniform_boundaries(n, stages);
      break;
    case PartitionMethod::Kind::kParameters:
      b = balanced_boundaries(items.params, stages);
      break;
    case PartitionMethod::Kind::kType:
      b = balanced_boundaries(type_weights(items.types, method.type_regex), stages);
      break;
  }
  // Item boundaries -> block boundaries (item i + 1 is block i).
  StagePartition p;
  for (int64_t at : b) p.block_begin.push_back(std::clamp<int64_t>(at - 1, 0, items.blocks()));
  return p;
}

namespace {

PipelineItems anonymous_items(int64_t embedding, const std::vector<int64_t>& blocks, int64_t head) {
  PipelineItems items;
  items.types.push_back("Embedding");
  items.params.push_back(embedding);
  for (int64_t b : blocks) {
    items.types.push_back("Block");
    items.params.push_back(b);
  }
  items.types.push_back("Head");
  items.params.push_back(head);
  return items;
}

}  // namespace

StagePartition partition_uniform(int64_t blocks, int stages) {
  return partition_items(anonymous_items(0, std::vector<int64_t>(size_t(blocks), 0), 0),
                         PartitionMethod::kUniform, stages);
}

StagePartition partition_parameters(int64_t embedding, const std::vector<int64_t>& blocks,
                                    int64_t head, int stages) {
  return partition_items(anonymous_items(embedding, blocks, head), PartitionMethod::kParameters,
                         stages);
}

}  // namespace deepshard::parallel
