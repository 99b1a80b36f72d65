// FLOPs of the GPT and Llama models per trained token, from its shapes: the matrix multiplications
// only (projections, attention scores and values, the tied head), which is what MFU compares with a
// matmul peak. Elementwise work (norms, GELU, softmax, the loss) is left out, as in the usual
// 6·N + attention accounting (Kaplan et al. 2020, PaLM appendix B). The attention matmuls are
// counted over the full T×T square (the causal mask does not skip work in this implementation).
#pragma once

#include <cstdint>

namespace deepshard::models {

struct GptConfig;
struct LlamaConfig;

struct FlopsPerToken {
  double forward = 0;   // one forward pass, per token
  double backward = 0;  // gradients of inputs and weights: twice the forward
  double training() const { return forward + backward; }
};

// Per token of a sequence of `seq_len` tokens (0: the config's block_size). With
// C = n_embd, L = n_layer, T = seq_len, V = vocab_size:
//   forward = L · (24·C² + 4·T·C) + 2·C·V     (qkv 6C², proj 2C², mlp 16C²; QK^T and AV 2TC each)
// Activation-checkpointing recomputation is not counted (MFU's convention).
FlopsPerToken gpt_flops_per_token(const GptConfig& config, int64_t seq_len = 0);

// Training FLOPs (forward + backward) per token: gpt_flops_per_token(config, seq_len).training().
double flops_per_token(const GptConfig& config, int64_t seq_len = 0);

// The Llama model's, with K = C · n_kv_head / n_head (the key/value width) and I =
// intermediate_size:
//   forward = L · (4·C² + 4·C·K + 6·C·I + 4·T·C) + 2·C·V   (q, o: 2C² each; k, v: 2CK each;
//             gate, up, down: 2CI each; QK^T and AV 2TC each; the head, tied or not)
FlopsPerToken llama_flops_per_token(const LlamaConfig& config, int64_t seq_len = 0);

}  // namespace deepshard::models
