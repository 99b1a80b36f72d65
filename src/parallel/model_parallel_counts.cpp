// Per-rank parameter counts of a tensor x pipeline layout (model_parallel_counts.h).
#include "parallel/model_parallel_counts.h"

#include <algorithm>

#include "deepshard/util/error.h"

namespace deepshard::parallel {
namespace {

using models::NamedShape;

void check_divides(const NamedShape& p, const sharding::TensorPlan& plan, int tensor_size) {
  const int dim = plan.split_dim(p.name);
  if (dim < 0) return;
  int64_t extent = p.shape.at(size_t(dim));
  if (plan.split(p.name) == sharding::TensorSplit::kQkvRows) extent /= 3;  // q, k, v each split
  DS_CHECK(extent % tensor_size == 0, ConfigError, "tensor_parallel.size ", tensor_size,
           " does not divide dimension ", dim, " (", extent, ") of ", p.name);
}

}  // namespace

int ModelParallelCounts::heaviest_stage() const {
  return static_cast<int>(std::max_element(stage_params.begin(), stage_params.end()) -
                          stage_params.begin());
}

ModelParallelCounts model_parallel_counts(const std::vector<models::NamedShape>& shapes,
                                          const std::string& tied, const sharding::TensorPlan& plan,
                                          const std::string& layer_type, int tensor_size,
                                          int stages, const PartitionMethod& method) {
  DS_CHECK(tensor_size >= 1, ConfigError, "tensor_parallel.size: must be >= 1, got ", tensor_size);
  int64_t blocks = 0;
  for (const auto& p : shapes) blocks = std::max(blocks, p.item + 1);
  // Whole and per-tensor-rank counts of each item: [embedding, blocks..., head].
  std::vector<int64_t> whole(size_t(blocks + 2), 0), local(size_t(blocks + 2), 0);
  auto index = [&](int64_t item) {
    return size_t(item == NamedShape::kEmbedding ? 0
                  : item == NamedShape::kHead    ? blocks + 1
                                                 : item + 1);
  };
  for (const auto& p : shapes) {
    check_divides(p, plan, tensor_size);
    const size_t i = index(p.item);
    whole[i] += p.numel();
    local[i] += plan.rank_numel(p.name, p.numel(), tensor_size);
    if (p.name == tied && stages > 1) {  // the last stage's own copy of the tied embedding
      whole.back() += p.numel();
      local.back() += plan.rank_numel(p.name, p.numel(), tensor_size);
    }
  }
  PipelineItems items{std::vector<std::string>(whole.size(), layer_type), whole};
  items.types.front() = "Embedding";
  items.types.back() = "Head";
  ModelParallelCounts out;
  out.partition = partition_items(items, method, stages);
  for (int s = 0; s < stages; ++s) {
    int64_t n = 0;
    if (s == 0) n += local.front();
    for (int64_t b = out.partition.begin(s); b < out.partition.end(s); ++b)
      n += local[size_t(b + 1)];
    if (s == stages - 1) n += local.back();
    out.stage_params.push_back(n);
  }
  return out;
}

}  // namespace deepshard::parallel
