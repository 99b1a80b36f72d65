// Implementation of save_model_weights (see save_weights.h).
#include "train/save_weights.h"

#include <torch/torch.h>

#include <map>

#include "deepshard/checkpoint/hf_weights.h"
#include "deepshard/util/error.h"

namespace deepshard::train {

void check_weights_savable(const config::DsConfig& config) {
  DS_CHECK(config.zero.stage != 3 || config.zero.gather_16bit_weights_on_model_save, ConfigError,
           "saving the model weights at ZeRO stage 3: the parameters are partitioned across the "
           "ranks; set zero_optimization.stage3_gather_16bit_weights_on_model_save to true to "
           "gather them and have rank 0 write the full weights");
}

void save_model_weights(zero::Engine& engine, const models::CausalLmImpl& model,
                        const std::string& arch, const std::string& path, bool writer,
                        parallel::TensorParallelModel* tensor_parallel) {
  check_weights_savable(engine.config());
  const at::ScalarType dtype = model.parameters().front().scalar_type();
  engine.with_full_parameters([&] {
    if (!tensor_parallel) {
      if (writer) checkpoint::save_hf_safetensors(model, path, dtype);
      return;
    }
    std::map<std::string, at::Tensor> whole;
    for (auto& [name, value] : tensor_parallel->gather_full_parameters()) whole[name] = value;
    if (writer) checkpoint::save_hf_safetensors(arch, whole, path, dtype);
  });
}

}  // namespace deepshard::train
