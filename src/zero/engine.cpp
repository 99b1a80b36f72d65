// Engine::initialize: checks what the config asks of every stage and picks the implementation for
// the configured ZeRO stage.
#include "deepshard/zero/engine.h"

#include "deepshard/config/loader.h"
#include "deepshard/util/error.h"
#include "util/log.h"
#include "zero/engines/sharded_optimizer_engine.h"
#include "zero/engines/stage0_engine.h"
#include "zero/engines/stage3_engine.h"

namespace deepshard::zero {

std::unique_ptr<Engine> Engine::initialize(std::shared_ptr<torch::nn::Module> model,
                                           const config::DsConfig& config, comm::Group& group,
                                           PartitionedBuild* build) {
  DS_CHECK(model != nullptr, Error, "Engine::initialize: no model");
  config::check_supported(config);
  if (config.log_level) {
    if (auto level = log::parse_level(*config.log_level)) log::set_level(*level);
  }
  DS_CHECK(
      config.train_micro_batch_size_per_gpu * config.gradient_accumulation_steps * group.size() ==
          config.train_batch_size,
      ConfigError, "train_batch_size: ", config.train_batch_size,
      " != ", config.train_micro_batch_size_per_gpu, " * ", config.gradient_accumulation_steps,
      " * ", group.size(), " (micro batch * accumulation steps * world size)");
  DS_CHECK(build == nullptr || config.zero.stage == 3, ConfigError,
           "a model built under zero.Init (partitioned blocks) needs zero_optimization.stage 3, "
           "not ",
           config.zero.stage);
  switch (config.zero.stage) {
    case 0:
      return std::make_unique<Stage0Engine>(std::move(model), config, group);
    case 1:
    case 2:
      return std::make_unique<ShardedOptimizerEngine>(std::move(model), config, group,
                                                      /*partition_grads=*/config.zero.stage == 2);
    case 3:
      return std::make_unique<Stage3Engine>(std::move(model), config, group, build);
    default:
      throw ConfigError("not supported yet: zero_optimization.stage=" +
                        std::to_string(config.zero.stage));
  }
}

std::unique_ptr<Engine> Engine::initialize(std::shared_ptr<torch::nn::Module> model,
                                           const std::string& config_path, comm::Group& group,
                                           PartitionedBuild* build) {
  return initialize(std::move(model), config::load_ds_config(config_path, group.size()), group,
                    build);
}

std::unique_ptr<Engine> Engine::initialize(const ModuleTree& model, const config::DsConfig& config,
                                           comm::Group& group, PartitionedBuild* build) {
  return initialize(model.module(), config, group, build);
}

Engine::~Engine() = default;

at::Tensor Engine::operator()(const at::Tensor& input_ids, const at::Tensor& labels) {
  DS_CHECK(forward_, Error,
           "engine(input_ids, labels): no forward set (Engine::set_forward, or build the engine "
           "with train::initialize for a deepshard model)");
  return forward_(input_ids, labels);
}

}  // namespace deepshard::zero
