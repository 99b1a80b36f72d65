// estimate_gpt_activations (see gpt/memory.h). B batch, T tokens, C width, H heads, s element
// size; R = B*T*C*s (one residual-stream tensor), A = B*H*T*T*s (one attention matrix).
// A block's forward keeps (dropout p = 0): ln_1's output (R) and statistics, the contiguous
// copies of q, k^T and v that batched matmul makes (3R), the softmax output (A), the re-laid-out
// attention output that c_proj saves (R), the residual sum h (R), ln_2's output (R) and
// statistics, c_fc's output that GELU saves (4R), GELU's output that c_proj saves (4R), and the
// block's output (R): 16R + A. Dropout p > 0 adds the attention mask and the dropped attention
// (2A) and the two residual-branch masks (2R). The embedding keeps its sum (R, plus a mask with
// dropout); the head keeps ln_f's output (R) and the fp32 log-softmax over the vocabulary
// (B*T*V*4); the logits themselves are freed when the loss returns.
#include "models/gpt/memory.h"

#include <algorithm>

#include "deepshard/util/error.h"

namespace deepshard::models {

GptActivationEstimate estimate_gpt_activations(const GptConfig& c, int64_t batch, int64_t seq,
                                               int64_t dtype_bytes,
                                               std::optional<int64_t> number_checkpoints) {
  DS_CHECK(batch > 0 && seq > 0 && seq <= c.block_size && dtype_bytes > 0, Error,
           "activation estimate: micro-batch ", batch, " and sequence length ", seq,
           " must be positive (sequence at most block_size ", c.block_size, ")");
  const bool dropout = c.dropout > 0.0;
  const int64_t tokens = batch * seq;
  const int64_t R = tokens * c.n_embd * dtype_bytes;
  const int64_t A = batch * c.n_head * seq * seq * dtype_bytes;
  const int64_t ln_stats = 2 * tokens * dtype_bytes;  // mean and rstd per token
  GptActivationEstimate e;
  e.residual = R;
  e.block = 16 * R + A + 2 * ln_stats + (dropout ? 2 * R + 2 * A : 0);
  e.embedding = (dropout ? R : 0) + seq * 8;  // the mask; the positions wpe saves
  e.head = R + ln_stats + tokens * c.vocab_size * 4;
  const int64_t L = c.n_layer;
  const int64_t N = std::clamp<int64_t>(number_checkpoints.value_or(L), 0, L);
  e.regions = N;
  // Without checkpointing: the embedding's sum (block 0's input) and every block's tensors (each
  // includes its output, the next block's input).
  e.plain = R + e.embedding + L * e.block + e.head;
  // Checkpointing the first N blocks: at the end of the forward, their inputs and the plain
  // blocks' tensors (the last checkpointed block's output is a plain block's input, or ln_f's);
  // during the recompute of block N-1 (after the head's and the plain blocks' backward), the
  // inputs of blocks 0..N-1 and that block's tensors.
  const int64_t end_of_forward = R + e.embedding + N * R + (L - N) * e.block + e.head;
  const int64_t recompute = N > 0 ? e.embedding + N * R + e.block : 0;
  e.checkpointed = std::max(end_of_forward, recompute);
  return e;
}

int64_t gpt_parameter_count(const GptConfig& c) {
  const int64_t C = c.n_embd, bias = c.bias ? 1 : 0;
  // Per block: 2 LayerNorms (weight, bias), c_attn (3C x C), c_proj (C x C), c_fc (4C x C),
  // mlp c_proj (C x 4C), and their biases.
  const int64_t block = 4 * C + 12 * C * C + bias * (3 * C + C + 4 * C + C);
  return c.vocab_size * C + c.block_size * C + c.n_layer * block + 2 * C;
}

}  // namespace deepshard::models
