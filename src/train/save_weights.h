// Saving a trained model's weights as a Hugging Face safetensors file (its architecture's names:
// the format `deepshard generate --weights` and model.init_from read), in the parameters' dtype. At
// ZeRO stage 3 no rank holds the whole model: with
// zero_optimization.stage3_gather_16bit_weights_on_model_save every rank takes part in gathering
// the full parameters and rank 0 writes them; without it the save is refused with a ConfigError
// (DeepSpeed would write an empty or partial file). With tensor parallelism the slices are gathered
// over the tensor group (TensorParallelModel::gather_full_parameters); with a pipeline the stages'
// parameters are then gathered over the writer's pipeline group (its data and tensor rank 0).
#pragma once

#include <map>
#include <string>

#include "deepshard/comm/group.h"
#include "deepshard/models/causal_lm.h"
#include "deepshard/zero/engine.h"
#include "models/tensor_parallel_model.h"

namespace deepshard::train {

// Throws the ConfigError save_model_weights would throw for this config (checked before training).
void check_weights_savable(const config::DsConfig& config);

// With a pipeline: the pipeline group (`stages`, null without a pipeline) and whether this rank
// takes part in gathering the stages for the writer (`sends`: data and tensor rank 0; the other
// ranks' pipeline groups do nothing).
struct PipelineWeights {
  comm::Group* stages = nullptr;
  bool sends = false;
};

// The whole model's parameters by name, with tensor or pipeline parallelism: every rank of the job
// calls it (a collective); the tensor slices are gathered over the tensor group, then (with a
// pipeline) the stages over the pipeline groups of the ranks `pipeline.sends` marks, whose result
// is the whole model (the others' is their stage's, or nothing). Copies, valid after the call.
std::map<std::string, at::Tensor> gather_whole_parameters(
    zero::Engine& engine, const models::CausalLmImpl& model,
    models::TensorParallelModel* tensor_parallel, const PipelineWeights& pipeline);

// To be called on every rank of the job (a collective at stage 3 and with tensor or pipeline
// parallelism); the job's rank 0 (`writer`) writes `path`. `tensor_parallel`: the model's slices
// are gathered over the tensor group into the whole parameters first (null: the model is whole).
void save_model_weights(zero::Engine& engine, const models::CausalLmImpl& model,
                        const std::string& arch, const std::string& path, bool writer,
                        models::TensorParallelModel* tensor_parallel = nullptr,
                        const PipelineWeights& pipeline = {});

}  // namespace deepshard::train
