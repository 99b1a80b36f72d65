// How much activation memory a GPT training pass keeps for backward, predicted from the model's
// shapes: what each libtorch 1.13 operation of the forward saves (docs/activation.md derives it),
// for a micro-batch of `batch` sequences of `seq` tokens. "Kept at the peak" is what
// activation::ActivationMeter counts: the largest amount held at the end of the forward or at the
// end of a checkpointed block's recompute; temporaries that live only inside one operation and
// gradients are not included.
#pragma once

#include <cstdint>
#include <optional>

#include "deepshard/models/gpt.h"

namespace deepshard::models {

struct GptActivationEstimate {
  int64_t plain = 0;         // no checkpointing
  int64_t checkpointed = 0;  // the first `regions` blocks checkpointed
  int64_t regions = 0;
  // The parts (bytes): one block's saved tensors, one residual-stream tensor [B, T, C], the
  // embedding's and the head's saved tensors.
  int64_t block = 0, residual = 0, embedding = 0, head = 0;
};

// `dtype_bytes`: the activations' element size (4 fp32, 2 bf16); the head's log-softmax is fp32
// whatever the dtype. `number_checkpoints`: blocks checkpointed per pass (absent: all).
GptActivationEstimate estimate_gpt_activations(const GptConfig& config, int64_t batch, int64_t seq,
                                               int64_t dtype_bytes,
                                               std::optional<int64_t> number_checkpoints = {});

// Parameters of a GPT with `config` (tied head counted once).
int64_t gpt_parameter_count(const GptConfig& config);

}  // namespace deepshard::models
