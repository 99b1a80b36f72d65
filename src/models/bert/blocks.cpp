// The BERT encoder's parts (bert.h): the embeddings, bidirectional self-attention, the
// post-LayerNorm residual outputs, the GELU intermediate, the encoder layer (an activation-
// checkpointing region), the pooler and the masked-LM head's transform and bias. Submodules are
// registered in Hugging Face's order and names. With config.fused_kernels the Linear layers run
// on oneDNN's sgemm (kernels/linear.h) and the LayerNorms as the fused kernel.
#include <torch/torch.h>

#include <cmath>

#include "activation/checkpoint.h"
#include "deepshard/models/bert.h"
#include "deepshard/util/error.h"
#include "kernels/matmul.h"
#include "models/layer_norm_call.h"
#include "models/linear_call.h"

namespace deepshard::models {
namespace {

torch::nn::Linear linear(int64_t in, int64_t out) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(true));
}

torch::nn::LayerNorm layer_norm(const BertConfig& config) {
  return torch::nn::LayerNorm(
      torch::nn::LayerNormOptions({config.n_embd}).eps(config.layer_norm_eps));
}

}  // namespace

BertEmbeddingsImpl::BertEmbeddingsImpl(const BertConfig& config)
    : fused_(config.fused_kernels), dropout_(config.dropout) {
  word_embeddings =
      register_module("word_embeddings", torch::nn::Embedding(config.vocab_size, config.n_embd));
  position_embeddings = register_module("position_embeddings",
                                        torch::nn::Embedding(config.block_size, config.n_embd));
  token_type_embeddings = register_module(
      "token_type_embeddings", torch::nn::Embedding(config.type_vocab_size, config.n_embd));
  LayerNorm = register_module("LayerNorm", layer_norm(config));
}

at::Tensor BertEmbeddingsImpl::forward(const at::Tensor& idx) {
  // One segment: every token is of type 0 (its row is added to every position).
  const at::Tensor pos = torch::arange(idx.size(1), idx.options());
  const at::Tensor sum =
      word_embeddings(idx) + position_embeddings(pos) + token_type_embeddings->weight.select(0, 0);
  return torch::dropout(apply_layer_norm(LayerNorm, sum, fused_), dropout_, is_training());
}

BertSelfAttentionImpl::BertSelfAttentionImpl(const BertConfig& config)
    : n_head_(config.n_head), dropout_(config.dropout), fused_(config.fused_kernels) {
  DS_CHECK(config.n_head > 0 && config.n_embd % config.n_head == 0, Error, "BERT config: n_embd ",
           config.n_embd, " is not a multiple of n_head ", config.n_head);
  query = register_module("query", linear(config.n_embd, config.n_embd));
  key = register_module("key", linear(config.n_embd, config.n_embd));
  value = register_module("value", linear(config.n_embd, config.n_embd));
}

at::Tensor BertSelfAttentionImpl::forward(const at::Tensor& x) {
  const int64_t batch = x.size(0), seq = x.size(1), width = x.size(2);
  const int64_t head_size = width / n_head_;
  auto heads = [&](torch::nn::Linear& proj) {  // [B, T, C] -> [B, n_head, T, head_size]
    return apply_linear(proj, x, fused_).view({batch, seq, n_head_, head_size}).transpose(1, 2);
  };
  const at::Tensor q = heads(query), k = heads(key), v = heads(value);
  // Every token attends to every token (no mask: the windows hold no padding). Softmax in fp32.
  const at::Tensor scores =
      kernels::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(double(head_size)));
  at::Tensor att = torch::softmax(scores, /*dim=*/-1, at::kFloat).to(q.scalar_type());
  att = torch::dropout(att, dropout_, is_training());
  return kernels::matmul(att, v).transpose(1, 2).contiguous().view({batch, seq, width});
}

BertResidualOutputImpl::BertResidualOutputImpl(int64_t in, const BertConfig& config)
    : dropout_(config.dropout), fused_(config.fused_kernels) {
  dense = register_module("dense", linear(in, config.n_embd));
  LayerNorm = register_module("LayerNorm", layer_norm(config));
}

at::Tensor BertResidualOutputImpl::forward(const at::Tensor& x, const at::Tensor& residual) {
  const at::Tensor out = torch::dropout(apply_linear(dense, x, fused_), dropout_, is_training());
  return apply_layer_norm(LayerNorm, out + residual, fused_);
}

BertAttentionImpl::BertAttentionImpl(const BertConfig& config) {
  self = register_module("self", BertSelfAttention(config));
  output = register_module("output", BertResidualOutput(config.n_embd, config));
}

at::Tensor BertAttentionImpl::forward(const at::Tensor& x) { return output(self(x), x); }

BertIntermediateImpl::BertIntermediateImpl(const BertConfig& config)
    : fused_(config.fused_kernels) {
  dense = register_module("dense", linear(config.n_embd, config.intermediate_size));
}

at::Tensor BertIntermediateImpl::forward(const at::Tensor& x) {
  return torch::gelu(apply_linear(dense, x, fused_));  // erf form (HF's "gelu")
}

BertLayerImpl::BertLayerImpl(const BertConfig& config) {
  attention = register_module("attention", BertAttention(config));
  intermediate = register_module("intermediate", BertIntermediate(config));
  output = register_module("output", BertResidualOutput(config.intermediate_size, config));
}

at::Tensor BertLayerImpl::forward(const at::Tensor& x) {
  // A checkpointable region: recomputed in backward when the trainer checkpoints activations
  // (activation/checkpoint.h), a plain call otherwise.
  return activation::checkpoint([this](const at::Tensor& in) { return forward_region(in); }, x);
}

at::Tensor BertLayerImpl::forward_region(const at::Tensor& x) {
  const at::Tensor h = attention(x);  // LayerNorm(x + attention output)
  return output(intermediate(h), h);  // LayerNorm(h + MLP output)
}

BertPoolerImpl::BertPoolerImpl(const BertConfig& config)
    : fused_(config.fused_kernels), mean_(config.mean_pooling) {
  dense = register_module("dense", linear(config.n_embd, config.n_embd));
}

at::Tensor BertPoolerImpl::forward(const at::Tensor& hidden) {
  const at::Tensor pooled = mean_ ? hidden.mean(1) : hidden.select(1, 0);
  return torch::tanh(apply_linear(dense, pooled, fused_));
}

BertHeadTransformImpl::BertHeadTransformImpl(const BertConfig& config)
    : fused_(config.fused_kernels) {
  dense = register_module("dense", linear(config.n_embd, config.n_embd));
  LayerNorm = register_module("LayerNorm", layer_norm(config));
}

at::Tensor BertHeadTransformImpl::forward(const at::Tensor& x) {
  return apply_layer_norm(LayerNorm, torch::gelu(apply_linear(dense, x, fused_)), fused_);
}

BertLmPredictionImpl::BertLmPredictionImpl(const BertConfig& config) {
  transform = register_module("transform", BertHeadTransform(config));
  bias = register_parameter("bias", torch::zeros({config.vocab_size}));
}

}  // namespace deepshard::models
