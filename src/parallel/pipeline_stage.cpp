// GptStage: the parameters a pipeline stage of a GPT keeps and its part of the forward pass
// (pipeline_stage.h).
#include "deepshard/parallel/pipeline_stage.h"

#include <torch/torch.h>

#include "deepshard/kernels/fused_ops.h"
#include "deepshard/kernels/linear.h"
#include "deepshard/util/error.h"
#include "models/layer_norm_call.h"

namespace deepshard::parallel {
namespace {

int64_t numel_of(torch::nn::Module& module) {
  int64_t n = 0;
  for (const at::Tensor& p : module.parameters()) n += p.numel();
  return n;
}

// Block index of a parameter name "h.<i>.…", or -1.
int64_t block_of(const std::string& name) {
  if (name.rfind("h.", 0) != 0) return -1;
  return std::stoll(name.substr(2, name.find('.', 2) - 2));
}

}  // namespace

StagePartition partition_gpt(models::Gpt& model, PartitionMethod method, int stages) {
  const int64_t blocks = static_cast<int64_t>(model->blocks.size());
  if (method == PartitionMethod::kUniform) return partition_uniform(blocks, stages);
  std::vector<int64_t> counts;
  for (auto& block : model->blocks) counts.push_back(numel_of(*block));
  const int64_t wte = model->wte->weight.numel();
  return partition_parameters(wte + model->wpe->weight.numel(), counts,
                              numel_of(*model->ln_f) + wte, stages);
}

GptStage::GptStage(models::Gpt model, const StagePartition& partition, int stage)
    : model_(std::move(model)),
      stage_(stage),
      stages_(partition.stages()),
      block_begin_(partition.begin(stage)),
      block_end_(partition.end(stage)) {
  DS_ASSERT(static_cast<int64_t>(model_->blocks.size()) == partition.block_begin.back(),
            "partition of ", partition.block_begin.back(), " blocks for a model of ",
            model_->blocks.size());
  torch::NoGradGuard no_grad;
  for (auto& item : model_->named_parameters()) {
    if (holds(item.key())) {
      params_.emplace_back(item.key(), item.value());
    } else {
      // Released and frozen: an engine over the whole module flattens the stage's parameters only.
      item.value().set_data(at::empty({0}, item.value().options()));
      item.value().set_requires_grad(false);
    }
  }
}

bool GptStage::holds(const std::string& name) const {
  const int64_t block = block_of(name);
  if (block >= 0) return block >= block_begin_ && block < block_end_;
  if (name == "wte.weight") return is_first() || is_last();
  if (name.rfind("wpe.", 0) == 0) return is_first();
  return is_last();  // ln_f
}

std::vector<at::Tensor> GptStage::parameters() const {
  std::vector<at::Tensor> out;
  for (const auto& item : params_) out.push_back(item.second);
  return out;
}

at::Tensor GptStage::forward(const at::Tensor& input) {
  auto& gpt = *model_;
  at::Tensor x = input;
  if (is_first()) {
    DS_CHECK(input.dim() == 2 && input.scalar_type() == at::kLong, Error,
             "pipeline stage 0: idx must be [B, T] int64, got ", input.sizes());
    DS_CHECK(input.size(1) <= gpt.config().block_size, Error, "pipeline stage 0: sequence length ",
             input.size(1), " exceeds block_size ", gpt.config().block_size);
    const at::Tensor pos = torch::arange(input.size(1), input.options());
    x = torch::dropout(gpt.wte(input) + gpt.wpe(pos), gpt.config().dropout, gpt.is_training());
  }
  for (int64_t i = block_begin_; i < block_end_; ++i) {
    x = gpt.unit_calls()(static_cast<size_t>(i), [&] { return gpt.blocks[i]->forward(x); });
  }
  return x;
}

at::Tensor GptStage::loss(const at::Tensor& hidden, const at::Tensor& targets) {
  DS_ASSERT(is_last(), "the loss is the last stage's");
  auto& gpt = *model_;
  const bool fused = gpt.config().fused_kernels;
  // As models::Gpt's head: ln_f, then the tied wte (kernels::linear with the fused kernels).
  const at::Tensor x = models::apply_layer_norm(gpt.ln_f, hidden, fused);
  const at::Tensor logits =
      fused ? kernels::linear(x, gpt.wte->weight) : torch::linear(x, gpt.wte->weight);
  const at::Tensor flat = logits.view({-1, logits.size(-1)});
  if (fused) return kernels::cross_entropy(flat, targets.reshape({-1}));
  return torch::nn::functional::cross_entropy(flat.to(at::kFloat), targets.reshape({-1}));
}

}  // namespace deepshard::parallel
