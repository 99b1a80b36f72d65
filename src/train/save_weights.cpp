// Implementation of save_model_weights (see save_weights.h).
#include "train/save_weights.h"

#include <torch/torch.h>

#include <map>
#include <nlohmann/json.hpp>

#include "deepshard/util/error.h"
#include "models/hf_weights.h"
#include "zero/rank_agreement.h"

namespace deepshard::train {
namespace {

using WholeParameters = std::map<std::string, at::Tensor>;

// The whole parameters this rank's stage holds (its tensor slices gathered over the tensor group
// first), by name. Another stage's parameters, released on this rank, have no elements.
WholeParameters stage_parameters(const models::CausalLmImpl& model,
                                 models::TensorParallelModel* tensor_parallel) {
  WholeParameters out;
  if (tensor_parallel) {
    for (auto& [name, value] : tensor_parallel->gather_full_parameters())
      if (value.numel() > 0) out[name] = value;
    return out;
  }
  for (const auto& item : model.named_parameters())
    if (item.value().numel() > 0) out[item.key()] = item.value().detach();
  return out;
}

// The whole model on the first stage of `stages` (every stage's parameters, a tied one from the
// first stage holding it): each stage's tensors are broadcast from it as one flat buffer, in the
// order of the names and shapes every stage announced. Collective over `stages`.
WholeParameters gather_stages(comm::Group& stages, WholeParameters mine) {
  nlohmann::json announced = nlohmann::json::array();
  for (const auto& [name, value] : mine) announced.push_back({name, value.sizes().vec()});
  const std::vector<std::string> all = zero::all_gather_text(stages, announced.dump());
  const at::TensorOptions options = mine.begin()->second.options();
  WholeParameters out;
  for (int s = 0; s < stages.size(); ++s) {
    std::vector<std::pair<std::string, std::vector<int64_t>>> sent;  // not held by an earlier stage
    int64_t numel = 0;
    for (const auto& entry : nlohmann::json::parse(all[s])) {
      auto name = entry.at(0).get<std::string>();
      auto shape = entry.at(1).get<std::vector<int64_t>>();
      if (out.count(name) > 0) continue;
      numel += c10::multiply_integers(shape);
      out[name] = at::Tensor();
      sent.emplace_back(std::move(name), std::move(shape));
    }
    at::Tensor flat = at::empty({numel}, options);
    if (s == stages.rank()) {
      int64_t offset = 0;
      for (const auto& [name, shape] : sent) {
        const at::Tensor& t = mine.at(name);
        flat.narrow(0, offset, t.numel()).copy_(t.reshape({-1}));
        offset += t.numel();
      }
    }
    if (s > 0) stages.broadcast(flat, s);
    int64_t offset = 0;
    for (const auto& [name, shape] : sent) {
      const int64_t n = c10::multiply_integers(shape);
      out[name] = flat.narrow(0, offset, n).view(shape);
      offset += n;
    }
  }
  return out;
}

}  // namespace

void check_weights_savable(const config::DsConfig& config) {
  DS_CHECK(config.zero.stage != 3 || config.zero.gather_16bit_weights_on_model_save, ConfigError,
           "saving the model weights at ZeRO stage 3: the parameters are partitioned across the "
           "ranks; set zero_optimization.stage3_gather_16bit_weights_on_model_save to true to "
           "gather them and have rank 0 write the full weights");
}

WholeParameters gather_whole_parameters(zero::Engine& engine, const models::CausalLmImpl& model,
                                        models::TensorParallelModel* tensor_parallel,
                                        const PipelineWeights& pipeline) {
  WholeParameters whole;
  engine.with_full_parameters([&] {
    torch::NoGradGuard no_grad;
    whole = stage_parameters(model, tensor_parallel);
    if (pipeline.stages) {
      if (!pipeline.sends) return;  // the writer's stages gather without this rank
      whole = gather_stages(*pipeline.stages, std::move(whole));
    } else if (!tensor_parallel) {
      for (auto& [name, value] : whole) value = value.clone();  // the parameters themselves
    }
  });
  return whole;
}

void save_model_weights(zero::Engine& engine, const models::CausalLmImpl& model,
                        const std::string& arch, const std::string& path, bool writer,
                        models::TensorParallelModel* tensor_parallel,
                        const PipelineWeights& pipeline) {
  check_weights_savable(engine.config());
  const at::ScalarType dtype = model.parameters().front().scalar_type();
  if (!tensor_parallel && !pipeline.stages) {
    engine.with_full_parameters([&] {
      if (writer) models::save_hf_safetensors(model, path, dtype);
    });
    return;
  }
  const WholeParameters whole = gather_whole_parameters(engine, model, tensor_parallel, pipeline);
  if (writer) models::save_hf_safetensors(arch, whole, path, dtype);
}

}  // namespace deepshard::train
