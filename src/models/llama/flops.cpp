// FLOPs per token of the Llama from its shapes (flops.h).
#include "deepshard/models/flops.h"

#include "deepshard/models/llama.h"

namespace deepshard::models {

FlopsPerToken llama_flops_per_token(const LlamaConfig& config, int64_t seq_len) {
  const double c = static_cast<double>(config.n_embd);
  const double k = c * static_cast<double>(config.n_kv_head) / static_cast<double>(config.n_head);
  const double i = static_cast<double>(config.intermediate_size);
  const double l = static_cast<double>(config.n_layer);
  const double t = static_cast<double>(seq_len > 0 ? seq_len : config.block_size);
  const double v = static_cast<double>(config.vocab_size);
  FlopsPerToken f;
  f.forward = l * (4.0 * c * c + 4.0 * c * k + 6.0 * c * i + 4.0 * t * c) + 2.0 * c * v;
  f.backward = 2.0 * f.forward;
  return f;
}

}  // namespace deepshard::models
