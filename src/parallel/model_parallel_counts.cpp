// Per-rank parameter counts of a tensor x pipeline layout (model_parallel_counts.h).
#include "deepshard/parallel/model_parallel_counts.h"

#include <algorithm>

#include "deepshard/parallel/tensor_split.h"
#include "deepshard/util/error.h"

namespace deepshard::parallel {
namespace {

constexpr int64_t kEmbedding = -1, kHead = -2;

// The item of a parameter: its block index, kEmbedding or kHead; `type` gets a block's layer type
// (pipeline_items: the GPT's "Block", the Llama's "LlamaBlock").
int64_t item_of(const std::string& name, std::string* type = nullptr) {
  for (const auto& [prefix, block] :
       {std::pair<std::string, const char*>{"h.", "Block"},
        std::pair<std::string, const char*>{"model.layers.", "LlamaBlock"}}) {
    if (name.rfind(prefix, 0) != 0) continue;
    const size_t dot = name.find('.', prefix.size());
    if (dot != std::string::npos) {
      if (type != nullptr) *type = block;
      return std::stoll(name.substr(prefix.size(), dot - prefix.size()));
    }
  }
  if (name == "wte.weight" || name == "wpe.weight" || name == "model.embed_tokens.weight")
    return kEmbedding;
  return kHead;
}

void check_divides(const models::NamedShape& p, int tensor_size) {
  const int dim = tensor_split_dim(p.name);
  if (dim < 0) return;
  int64_t extent = p.shape.at(size_t(dim));
  if (tensor_split(p.name) == TensorSplit::kQkvRows) extent /= 3;  // each of q, k, v is split
  DS_CHECK(extent % tensor_size == 0, ConfigError, "tensor_parallel.size ", tensor_size,
           " does not divide dimension ", dim, " (", extent, ") of ", p.name);
}

}  // namespace

int ModelParallelCounts::heaviest_stage() const {
  return static_cast<int>(std::max_element(stage_params.begin(), stage_params.end()) -
                          stage_params.begin());
}

ModelParallelCounts model_parallel_counts(const std::vector<models::NamedShape>& shapes,
                                          const std::string& tied, int tensor_size, int stages,
                                          const PartitionMethod& method) {
  DS_CHECK(tensor_size >= 1, ConfigError, "tensor_parallel.size: must be >= 1, got ", tensor_size);
  int64_t blocks = 0;
  for (const auto& p : shapes) blocks = std::max(blocks, item_of(p.name) + 1);
  // Whole and per-tensor-rank counts of each item: [embedding, blocks..., head].
  std::vector<int64_t> whole(size_t(blocks + 2), 0), local(size_t(blocks + 2), 0);
  auto index = [&](int64_t item) {
    return size_t(item == kEmbedding ? 0 : item == kHead ? blocks + 1 : item + 1);
  };
  for (const auto& p : shapes) {
    check_divides(p, tensor_size);
    const size_t i = index(item_of(p.name));
    whole[i] += p.numel();
    local[i] += tensor_rank_numel(p.name, p.numel(), tensor_size);
    if (p.name == tied && stages > 1) {  // the last stage's own copy of the tied embedding
      whole.back() += p.numel();
      local.back() += tensor_rank_numel(p.name, p.numel(), tensor_size);
    }
  }
  PipelineItems items{std::vector<std::string>(whole.size(), "Block"), whole};
  items.types.front() = "Embedding";
  items.types.back() = "Head";
  for (const auto& p : shapes) {
    std::string type;
    const int64_t item = item_of(p.name, &type);
    if (item >= 0) items.types[index(item)] = type;
  }
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
