// FLOPs per token of the BERT from its shapes (bert.h, flops.h): the matmuls only, attention over
// the full T×T square, the masked-LM head (transform and decoder) at the masked positions only (as
// the loss computes it, head_loss): round(mask_probability T) of every T.
#include "deepshard/models/bert.h"

namespace deepshard::models {

FlopsPerToken bert_flops_per_token(const BertConfig& config, int64_t seq_len) {
  const double c = static_cast<double>(config.n_embd);
  const double i = static_cast<double>(config.intermediate_size);
  const double l = static_cast<double>(config.n_layer);
  const double t = static_cast<double>(seq_len > 0 ? seq_len : config.block_size);
  const double v = static_cast<double>(config.vocab_size);
  const double predicted = static_cast<double>(config.masked_per_sample(int64_t(t))) / t;
  FlopsPerToken f;
  f.forward =
      l * (8.0 * c * c + 4.0 * c * i + 4.0 * t * c) + predicted * (2.0 * c * c + 2.0 * c * v);
  f.backward = 2.0 * f.forward;
  return f;
}

}  // namespace deepshard::models
