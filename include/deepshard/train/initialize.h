// deepspeed.initialize for a deepshard model (models::CausalLmImpl): the ZeRO engine of the
// config, whose call `engine(input_ids, labels)` is the model's mean loss on the micro-batch, as
// Hugging Face's models return outputs.loss for DeepSpeed's loop:
//   auto loss = (*engine)(input_ids, labels);  engine->backward(loss);  engine->step();
// labels [B, T]: the language-model loss (model->loss; -100 targets left out); labels [B]: the
// sequence classification loss of the model's classification head (model->classification_loss).
#pragma once

#include <memory>

#include "deepshard/comm/group.h"
#include "deepshard/config/ds_config.h"
#include "deepshard/models/causal_lm.h"
#include "deepshard/zero/engine.h"
#include "deepshard/zero/partitioned_build.h"

namespace deepshard::train {

// The loss engine(input_ids, labels) computes for `model` (by the labels' shape, see above).
at::Tensor model_loss(models::CausalLmImpl& model, const at::Tensor& input_ids,
                      const at::Tensor& labels);

// zero::Engine::initialize(model, config, group, build), with the engine's forward set to
// model_loss of `model`.
std::unique_ptr<zero::Engine> initialize(std::shared_ptr<models::CausalLmImpl> model,
                                         const config::DsConfig& config, comm::Group& group,
                                         zero::PartitionedBuild* build = nullptr);

}  // namespace deepshard::train
