// The Llama decoder layer and its parts (llama.h): RMSNorm, rotary embeddings, grouped-query
// causal attention, the SwiGLU MLP. A decoder layer is an activation-checkpointing region. With
// config.fused_kernels the projections run on oneDNN's sgemm (kernels/linear.h).
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <utility>

#include "activation/checkpoint.h"
#include "deepshard/models/llama.h"
#include "deepshard/util/error.h"
#include "kernels/matmul.h"
#include "models/linear_call.h"

namespace deepshard::models {
namespace {

torch::nn::Linear linear(int64_t in, int64_t out) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false));
}

// cos and sin [T, head_dim] of the rotary angles t / theta^(2i / head_dim), i < head_dim / 2, each
// repeated over both halves (the rotate-half layout), computed in fp32 on `device`.
std::pair<at::Tensor, at::Tensor> rotary_tables(int64_t seq, int64_t head_dim, double theta,
                                                const at::Device& device) {
  const auto f32 = torch::TensorOptions().dtype(at::kFloat).device(device);
  const at::Tensor exponents = torch::arange(0, head_dim, 2, f32) / double(head_dim);
  const at::Tensor inv_freq = torch::pow(theta, exponents).reciprocal();
  const at::Tensor angles = torch::outer(torch::arange(seq, f32), inv_freq);  // [T, d/2]
  const at::Tensor emb = torch::cat({angles, angles}, -1);                    // [T, d]
  return {emb.cos(), emb.sin()};
}

// x * cos + rotate_half(x) * sin, rotate_half([x1, x2]) = [-x2, x1] (x split in halves).
at::Tensor apply_rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  const at::Tensor rotated = torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * cos + rotated * sin;
}

}  // namespace

RmsNormImpl::RmsNormImpl(int64_t dim, double eps) : eps_(eps) {
  weight = register_parameter("weight", torch::ones({dim}));
}

at::Tensor RmsNormImpl::forward(const at::Tensor& x) {
  const at::Tensor x32 = x.to(at::kFloat);
  const at::Tensor normed = x32 * torch::rsqrt(x32.pow(2).mean(-1, /*keepdim=*/true) + eps_);
  return weight * normed.to(x.scalar_type());
}

LlamaAttentionImpl::LlamaAttentionImpl(const LlamaConfig& config)
    : n_head_(config.n_head),
      n_kv_head_(config.n_kv_head),
      head_dim_(config.n_head > 0 ? config.n_embd / config.n_head : 0),
      rope_theta_(config.rope_theta),
      fused_(config.fused_kernels) {
  DS_CHECK(config.n_head > 0 && config.n_embd % config.n_head == 0 && head_dim_ % 2 == 0, Error,
           "Llama config: n_embd ", config.n_embd, " must be n_head (", config.n_head,
           ") times an even head size (rotary embeddings rotate pairs)");
  DS_CHECK(config.n_kv_head > 0 && config.n_head % config.n_kv_head == 0, Error,
           "Llama config: n_kv_head ", config.n_kv_head, " must divide n_head ", config.n_head);
  q_proj = register_module("q_proj", linear(config.n_embd, n_head_ * head_dim_));
  k_proj = register_module("k_proj", linear(config.n_embd, n_kv_head_ * head_dim_));
  v_proj = register_module("v_proj", linear(config.n_embd, n_kv_head_ * head_dim_));
  o_proj = register_module("o_proj", linear(n_head_ * head_dim_, config.n_embd));
}

at::Tensor llama_attention(const at::Tensor& q_in, const at::Tensor& k_in, const at::Tensor& v_in,
                           int64_t n_head, int64_t n_kv_head, double rope_theta) {
  const int64_t batch = q_in.size(0), seq = q_in.size(1), head_dim = q_in.size(2) / n_head;
  auto heads = [&](const at::Tensor& t, int64_t n) {
    return t.view({batch, seq, n, head_dim}).transpose(1, 2);  // [B, n, T, d]
  };
  auto [cos, sin] = rotary_tables(seq, head_dim, rope_theta, q_in.device());
  cos = cos.to(q_in.scalar_type());
  sin = sin.to(q_in.scalar_type());
  const at::Tensor q = apply_rotary(heads(q_in, n_head), cos, sin);
  // Grouped-query attention: key/value head j serves query heads j * group ... (j + 1) * group - 1.
  const int64_t group = n_head / n_kv_head;
  at::Tensor k = apply_rotary(heads(k_in, n_kv_head), cos, sin);
  at::Tensor v = heads(v_in, n_kv_head);
  if (group > 1) {
    k = k.repeat_interleave(group, 1);
    v = v.repeat_interleave(group, 1);
  }
  // Additive causal mask [T, T]: 0 on and below the diagonal, -inf above. Softmax in fp32.
  const at::Tensor mask =
      torch::full({seq, seq}, -std::numeric_limits<double>::infinity(), q_in.options()).triu(1);
  const at::Tensor scores =
      kernels::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(double(head_dim))) + mask;
  const at::Tensor att = torch::softmax(scores, /*dim=*/-1, at::kFloat).to(q.scalar_type());
  return kernels::matmul(att, v).transpose(1, 2).contiguous().view({batch, seq, n_head * head_dim});
}

at::Tensor LlamaAttentionImpl::forward(const at::Tensor& x) {
  const at::Tensor y =
      llama_attention(apply_linear(q_proj, x, fused_), apply_linear(k_proj, x, fused_),
                      apply_linear(v_proj, x, fused_), n_head_, n_kv_head_, rope_theta_);
  return apply_linear(o_proj, y, fused_);
}

LlamaMlpImpl::LlamaMlpImpl(const LlamaConfig& config) : fused_(config.fused_kernels) {
  gate_proj = register_module("gate_proj", linear(config.n_embd, config.intermediate_size));
  up_proj = register_module("up_proj", linear(config.n_embd, config.intermediate_size));
  down_proj = register_module("down_proj", linear(config.intermediate_size, config.n_embd));
}

at::Tensor LlamaMlpImpl::forward(const at::Tensor& x) {
  const at::Tensor gated =
      torch::silu(apply_linear(gate_proj, x, fused_)) * apply_linear(up_proj, x, fused_);
  return apply_linear(down_proj, gated, fused_);
}

LlamaBlockImpl::LlamaBlockImpl(const LlamaConfig& config) {
  input_layernorm = register_module("input_layernorm", RmsNorm(config.n_embd, config.rms_norm_eps));
  self_attn = register_module("self_attn", LlamaAttention(config));
  post_attention_layernorm =
      register_module("post_attention_layernorm", RmsNorm(config.n_embd, config.rms_norm_eps));
  mlp = register_module("mlp", LlamaMlp(config));
}

at::Tensor LlamaBlockImpl::forward(const at::Tensor& x) {
  // A checkpointable region: recomputed in backward when the trainer checkpoints activations
  // (activation/checkpoint.h), a plain call otherwise.
  return activation::checkpoint([this](const at::Tensor& in) { return forward_region(in); }, x);
}

at::Tensor LlamaBlockImpl::forward_region(const at::Tensor& x) {
  const at::Tensor h = x + self_attn(input_layernorm(x));
  return h + mlp(post_attention_layernorm(h));
}

}  // namespace deepshard::models
