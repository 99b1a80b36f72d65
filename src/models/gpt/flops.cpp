// FLOPs per token of the GPT from its shapes (flops.h).
#include "deepshard/models/flops.h"

#include "deepshard/models/gpt.h"

namespace deepshard::models {

FlopsPerToken gpt_flops_per_token(const GptConfig& config, int64_t seq_len) {
  const double c = static_cast<double>(config.n_embd);
  const double l = static_cast<double>(config.n_layer);
  const double t = static_cast<double>(seq_len > 0 ? seq_len : config.block_size);
  const double v = static_cast<double>(config.vocab_size);
  FlopsPerToken f;
  f.forward = l * (24.0 * c * c + 4.0 * t * c) + 2.0 * c * v;
  f.backward = 2.0 * f.forward;
  return f;
}

double flops_per_token(const GptConfig& config, int64_t seq_len) {
  return gpt_flops_per_token(config, seq_len).training();
}

}  // namespace deepshard::models
