// train::initialize (trainer.h): the engine of a deepshard model with its forward set, so that
// engine(input_ids, labels) gives the loss as in DeepSpeed's loop.
#include "deepshard/train/trainer.h"
#include "deepshard/util/error.h"

namespace deepshard::train {

at::Tensor model_loss(models::CausalLmImpl& model, const at::Tensor& input_ids,
                      const at::Tensor& labels) {
  DS_CHECK(labels.dim() == 1 || labels.dim() == 2, Error, model.arch(),
           ": labels must be [B] (classes) or [B, T] (tokens), got ", labels.sizes());
  return labels.dim() == 1 ? model.classification_loss(input_ids, labels)
                           : model.loss(input_ids, labels);
}

std::unique_ptr<zero::Engine> initialize(std::shared_ptr<models::CausalLmImpl> model,
                                         const config::DsConfig& config, comm::Group& group,
                                         zero::PartitionedBuild* build) {
  auto engine = zero::Engine::initialize(model, config, group, build);
  engine->set_forward([model](const at::Tensor& input_ids, const at::Tensor& labels) {
    return model_loss(*model, input_ids, labels);
  });
  return engine;
}

}  // namespace deepshard::train
