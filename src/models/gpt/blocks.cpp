// The GPT-2 transformer block and its parts: causal self-attention (matmul + masked softmax), the
// GELU (tanh) MLP, and the pre-LayerNorm residual block. Submodules are registered in Hugging
// Face's order and names (ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj). A block is
// an activation-checkpointing region. With config.fused_kernels the layer norms, the scaled causal
// softmax and the GELU run as the fused CPU kernels of kernels/fused_ops.h, the Linear layers on
// oneDNN's sgemm (kernels/linear.h), and fp32 attention as the blocked kernel of
// kernels/causal_attention.h.
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <vector>

#include "activation/checkpoint.h"
#include "deepshard/models/gpt.h"
#include "deepshard/util/error.h"
#include "kernels/causal_attention.h"
#include "kernels/fused_ops.h"
#include "kernels/matmul.h"
#include "models/attention.h"
#include "models/layer_norm_call.h"
#include "models/linear_call.h"

namespace deepshard::models {
namespace {

torch::nn::Linear linear(int64_t in, int64_t out, bool bias) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias));
}

torch::nn::LayerNorm layer_norm(int64_t n_embd) {
  // libtorch 1.13's LayerNorm has no bias-free affine form: LayerNorms keep their bias even when
  // config.bias is false (only the Linear layers drop theirs).
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({n_embd}).eps(1e-5));
}

}  // namespace

CausalSelfAttentionImpl::CausalSelfAttentionImpl(const GptConfig& config)
    : n_head_(config.n_head),
      n_embd_(config.n_embd),
      dropout_(config.dropout),
      fused_(config.fused_kernels) {
  DS_CHECK(config.n_head > 0 && config.n_embd % config.n_head == 0, Error, "GPT config: n_embd ",
           config.n_embd, " is not a multiple of n_head ", config.n_head);
  c_attn = register_module("c_attn", linear(n_embd_, 3 * n_embd_, config.bias));
  c_proj = register_module("c_proj", linear(n_embd_, n_embd_, config.bias));
}

at::Tensor dropout_slice(const at::Tensor& x, double p, bool training, int64_t dim, int64_t first,
                         int64_t whole) {
  if (!training || p == 0.0) return x;
  DS_CHECK(p > 0.0 && p < 1.0, Error, "dropout probability ", p, " is outside [0, 1)");
  DS_CHECK(first >= 0 && first + x.size(dim) <= whole, Error, "dropout_slice: [", first, ", ",
           first + x.size(dim), ") is not within ", whole);
  // torch::dropout of ones of the whole shape is its noise (Bernoulli(1 - p) / (1 - p)), drawn as
  // the one-rank run draws it; this rank multiplies its slice in, as dropout multiplies the whole.
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes[static_cast<size_t>(dim)] = whole;
  const at::Tensor noise = torch::dropout(at::ones(sizes, x.options()), p, /*train=*/true);
  return x * noise.narrow(dim, first, x.size(dim));
}

at::Tensor causal_attention(const at::Tensor& q_in, const at::Tensor& k_in, const at::Tensor& v_in,
                            int64_t n_head, double dropout, bool training, bool fused,
                            HeadSlice heads_held) {
  const int64_t batch = q_in.size(0), seq = q_in.size(1), width = q_in.size(2);
  const int64_t head_size = width / n_head;
  // [B, T, n_head * head_size] -> [B, n_head, T, head_size]
  auto heads = [&](const at::Tensor& t) {
    return t.view({batch, seq, n_head, head_size}).transpose(1, 2);
  };
  const at::Tensor q = heads(q_in), k = heads(k_in), v = heads(v_in);
  const double scale = 1.0 / std::sqrt(double(head_size));
  at::Tensor att = kernels::matmul(q, k.transpose(-2, -1));
  if (fused) {
    att = kernels::causal_softmax(att, scale);  // scale, mask and softmax in one pass
  } else {
    // Additive causal mask [T, T]: 0 on and below the diagonal, -inf above; device and dtype of q.
    const at::Tensor mask =
        torch::full({seq, seq}, -std::numeric_limits<double>::infinity(), q.options()).triu(1);
    att = torch::softmax(att * scale + mask, /*dim=*/-1);
  }
  att = heads_held.total > n_head
            ? dropout_slice(att, dropout, training, /*dim=*/1, heads_held.first, heads_held.total)
            : torch::dropout(att, dropout, training);
  return kernels::matmul(att, v).transpose(1, 2).contiguous().view({batch, seq, width});
}

at::Tensor CausalSelfAttentionImpl::forward(const at::Tensor& x) {
  // [B, T, 3C] -> q, k, v each [B, T, C]
  const at::Tensor packed = apply_linear(c_attn, x, fused_);
  const bool blocked = fused_ && (dropout_ == 0.0 || !is_training()) &&
                       kernels::blocked_attention_supported(packed, n_head_);
  at::Tensor y;
  if (blocked) {
    y = kernels::causal_attention(packed, n_head_);
  } else {
    const auto qkv = packed.split(n_embd_, /*dim=*/2);
    y = causal_attention(qkv[0], qkv[1], qkv[2], n_head_, dropout_, is_training(), fused_);
  }
  return torch::dropout(apply_linear(c_proj, y, fused_), dropout_, is_training());
}

MlpImpl::MlpImpl(const GptConfig& config) : dropout_(config.dropout), fused_(config.fused_kernels) {
  c_fc = register_module("c_fc", linear(config.n_embd, 4 * config.n_embd, config.bias));
  c_proj = register_module("c_proj", linear(4 * config.n_embd, config.n_embd, config.bias));
}

at::Tensor MlpImpl::forward(const at::Tensor& x) {
  const at::Tensor h = apply_linear(c_fc, x, fused_);
  const at::Tensor a = fused_ ? kernels::gelu_tanh(h) : torch::gelu(h, "tanh");
  return torch::dropout(apply_linear(c_proj, a, fused_), dropout_, is_training());
}

at::Tensor apply_layer_norm(torch::nn::LayerNorm& ln, const at::Tensor& x, bool fused) {
  if (!fused) return ln(x);
  return kernels::layer_norm(x, ln->weight, ln->bias, ln->options.eps());
}

BlockImpl::BlockImpl(const GptConfig& config) : fused_(config.fused_kernels) {
  ln_1 = register_module("ln_1", layer_norm(config.n_embd));
  attn = register_module("attn", CausalSelfAttention(config));
  ln_2 = register_module("ln_2", layer_norm(config.n_embd));
  mlp = register_module("mlp", Mlp(config));
}

at::Tensor BlockImpl::forward(const at::Tensor& x) {
  // The block is a checkpointable region: recomputed in backward when the trainer checkpoints
  // activations (activation/checkpoint.h), a plain call otherwise.
  return activation::checkpoint([this](const at::Tensor& in) { return forward_region(in); }, x);
}

at::Tensor BlockImpl::forward_region(const at::Tensor& x) {
  const at::Tensor h = x + attn(apply_layer_norm(ln_1, x, fused_));
  return h + mlp(apply_layer_norm(ln_2, h, fused_));
}

}  // namespace deepshard::models
