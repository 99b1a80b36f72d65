// PipelineStage: where a model's parameters sit in its forward pass (embedding, layer i, head),
// the partition by their counts, the parameters a stage keeps and its part of the forward pass
// (pipeline_stage.h).
#include "parallel/pipeline_stage.h"

#include <torch/torch.h>

#include <algorithm>
#include <unordered_map>

#include "deepshard/util/error.h"

namespace deepshard::parallel {
namespace {

constexpr int64_t kEmbedding = -1, kHead = -2;

// Every parameter of `model` (named, in its order) with its place in the forward pass: its layer
// (unit i of the sharding plan), kEmbedding (embedding_parameters()) or kHead (the rest); and the
// tied embedding weight's name ("" when untied).
struct ParameterPlaces {
  std::vector<std::pair<std::string, at::Tensor>> params;
  std::vector<int64_t> place;
  std::string tied;
  int64_t layers = 0;

  explicit ParameterPlaces(models::CausalLmImpl& model) {
    const sharding::ShardingPlan plan = model.sharding_plan();
    layers = static_cast<int64_t>(plan.units().size());
    DS_ASSERT(layers == model.num_layers(), "sharding plan of ", layers, " units for a model of ",
              model.num_layers(), " layers");
    std::unordered_map<const c10::TensorImpl*, int64_t> layer_of;
    for (int64_t i = 0; i < layers; ++i) {
      for (const at::Tensor& p : plan.units()[i].module->parameters())
        layer_of[p.unsafeGetTensorImpl()] = i;
    }
    const std::vector<std::string> embedding = model.embedding_parameters();
    DS_ASSERT(plan.tied().size() <= 1, "a pipeline stage ties one embedding to the head at most");
    if (!plan.tied().empty()) tied = plan.tied().front().param;
    for (auto& item : model.named_parameters()) {
      const auto layer = layer_of.find(item.value().unsafeGetTensorImpl());
      const bool embeds =
          std::find(embedding.begin(), embedding.end(), item.key()) != embedding.end();
      params.emplace_back(item.key(), item.value());
      place.push_back(layer != layer_of.end() ? layer->second : embeds ? kEmbedding : kHead);
    }
    DS_ASSERT(
        tied.empty() || std::find(embedding.begin(), embedding.end(), tied) != embedding.end(),
        "the tied parameter ", tied, " is not an embedding parameter");
  }
};

// A layer's type as DeepSpeed's type: partition sees it (a layer spec's class name): the class of
// the layer's module without namespace and libtorch's "Impl" suffix (GPT "Block", Llama
// "LlamaBlock").
std::string layer_type(const torch::nn::Module& layer) {
  std::string name = layer.name();
  if (const size_t colon = name.rfind("::"); colon != std::string::npos)
    name = name.substr(colon + 2);
  if (name.size() > 4 && name.compare(name.size() - 4, 4, "Impl") == 0)
    name.resize(name.size() - 4);
  return name;
}

}  // namespace

PipelineItems pipeline_items(models::CausalLmImpl& model) {
  const ParameterPlaces places(model);
  const sharding::ShardingPlan plan = model.sharding_plan();
  PipelineItems items;
  items.types.push_back("Embedding");
  for (int64_t i = 0; i < places.layers; ++i)
    items.types.push_back(layer_type(*plan.units()[i].module));
  items.types.push_back("Head");
  items.params.assign(items.types.size(), 0);
  for (size_t i = 0; i < places.params.size(); ++i) {
    const int64_t n = places.params[i].second.numel();
    const int64_t at = places.place[i];
    if (at >= 0) {
      items.params[size_t(at + 1)] += n;
    } else {
      (at == kEmbedding ? items.params.front() : items.params.back()) += n;
      if (places.params[i].first == places.tied) items.params.back() += n;  // the last stage's copy
    }
  }
  return items;
}

StagePartition partition_model(models::CausalLmImpl& model, const PartitionMethod& method,
                               int stages) {
  return partition_items(pipeline_items(model), method, stages);
}

PipelineStage::PipelineStage(std::shared_ptr<models::CausalLmImpl> model,
                             const StagePartition& partition, int stage,
                             models::TensorParallelModel* tensor)
    : model_(std::move(model)), tensor_(tensor), partition_(partition), stage_(stage) {
  const ParameterPlaces places(*model_);
  DS_ASSERT(places.layers == partition.block_begin.back(), "partition of ",
            partition.block_begin.back(), " layers for a model of ", places.layers);
  DS_ASSERT(stage >= 0 && stage < partition.stages(), "stage ", stage, " of ", partition.stages());
  DS_ASSERT(tensor == nullptr || &tensor->causal_lm() == model_.get(),
            "a tensor-parallel model over another model");
  tied_ = places.tied;
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < places.params.size(); ++i) {
    const auto& [name, p] = places.params[i];
    const int64_t at = places.place[i];
    const bool held =
        at >= 0 ? at >= partition.begin(stage) && at < partition.end(stage)
                : (at == kEmbedding && is_first()) || (is_last() && (at == kHead || name == tied_));
    if (held) {
      params_.emplace_back(name, p);
    } else {
      // Released and frozen: an engine over the whole module flattens the stage's parameters only.
      at::Tensor released = p;
      released.set_data(at::empty({0}, p.options()));
      released.set_requires_grad(false);
    }
  }
}

bool PipelineStage::holds(const std::string& name) const {
  for (const auto& item : params_)
    if (item.first == name) return true;
  return false;
}

std::vector<at::Tensor> PipelineStage::parameters() const {
  std::vector<at::Tensor> out;
  for (const auto& item : params_) out.push_back(item.second);
  return out;
}

at::Tensor PipelineStage::tied_weight() const {
  for (const auto& item : params_)
    if (item.first == tied_) return item.second;
  return at::Tensor();
}

at::Tensor PipelineStage::forward(const at::Tensor& input) {
  at::Tensor x = input;
  if (is_first() && tensor_) {
    model_->check_tokens(input);
    x = tensor_->embed(input);
  } else if (is_first()) {
    x = model_->embed(input);  // checks the tokens
  }
  for (int64_t i = partition_.begin(stage_); i < partition_.end(stage_); ++i)
    x = model_->run_layer(i, x);
  return x;
}

at::Tensor PipelineStage::loss(const at::Tensor& hidden, const at::Tensor& targets) {
  DS_ASSERT(is_last(), "the loss is the last stage's");
  if (tensor_) return tensor_->head_loss(hidden, targets);
  return model_->head_loss(hidden, targets);
}

}  // namespace deepshard::parallel
