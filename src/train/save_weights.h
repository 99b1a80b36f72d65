// Saving a trained model's weights as a Hugging Face safetensors file (GPT-2 or Llama names) (the
// format `deepshard generate --weights` and model.init_from read), in the parameters' dtype. At
// ZeRO stage 3 no rank holds the whole model: with
// zero_optimization.stage3_gather_16bit_weights_on_model_save every rank takes part in gathering
// the full parameters and rank 0 writes them; without it the save is refused with a ConfigError
// (DeepSpeed would write an empty or partial file). With tensor parallelism the slices are gathered
// over the tensor group (TensorParallelModel::gather_full_parameters).
#pragma once

#include <string>

#include "deepshard/models/causal_lm.h"
#include "deepshard/parallel/tensor_parallel_model.h"
#include "deepshard/zero/engine.h"

namespace deepshard::train {

// Throws the ConfigError save_model_weights would throw for this config (checked before training).
void check_weights_savable(const config::DsConfig& config);

// To be called on every rank of the job (a collective at stage 3 and with tensor parallelism);
// the job's rank 0 (`writer`) writes `path`. `tensor_parallel`: the model's slices are gathered
// over the tensor group into the whole parameters first (null: the model is whole).
void save_model_weights(zero::Engine& engine, const models::CausalLmImpl& model,
                        const std::string& arch, const std::string& path, bool writer,
                        parallel::TensorParallelModel* tensor_parallel = nullptr);

}  // namespace deepshard::train
