// Multi-rank scenarios for the public sharding API, run by tests/train/sharding_api_test.cpp:
// a model whose ranks run its units in different orders must fail on every rank at the first unit
// gather that differs (zero/stage3/fetch_check.h; no hang, no wrong numbers).
#include <deepshard/sharding/sharding_plan.h>
#include <torch/torch.h>

#include <string>

#include "deepshard/zero/engine.h"
#include "workers/worker.h"

namespace deepshard::testing {
namespace {

// Two linear units; `reverse` runs them in the other order.
class TwoUnitsImpl : public torch::nn::Module, public sharding::Shardable {
 public:
  explicit TwoUnitsImpl(bool reverse) : reverse_(reverse) {
    head = register_module("head", torch::nn::Linear(8, 8));
    a = register_module("a", torch::nn::Linear(8, 8));
    b = register_module("b", torch::nn::Linear(8, 8));
  }
  at::Tensor forward(at::Tensor x) {
    x = head(x);
    const size_t first = reverse_ ? 1 : 0;
    for (size_t i : {first, 1 - first}) {
      torch::nn::Linear& unit = i == 0 ? a : b;
      x = calls_(i, [&] { return unit(x); });
    }
    return x;
  }
  sharding::ShardingPlan sharding_plan() override {
    return sharding::ShardingPlan(calls_).unit("a", a.ptr()).unit("b", b.ptr());
  }
  torch::nn::Linear head{nullptr}, a{nullptr}, b{nullptr};

 private:
  bool reverse_;
  sharding::UnitCalls calls_;
};
TORCH_MODULE(TwoUnits);

// Rank 1 runs the units in the reverse order; every rank must get the divergence error.
DS_WORKER_SCENARIO(divergent_order) {
  config::DsConfig c;
  c.train_micro_batch_size_per_gpu = 2;
  c.gradient_accumulation_steps = 1;
  c.train_batch_size = 2 * group.size();
  c.optimizer.type = "AdamW";
  c.zero.stage = 3;
  c.zero.param_persistence_threshold = 0;
  TwoUnits model(group.rank() == 1);
  auto engine = zero::Engine::initialize(model.ptr(), c, group);
  try {
    engine->backward(model->forward(torch::ones({2, 8})).square().mean());
  } catch (const std::exception& e) {
    // The first gather differs (fetch_check.h; the root starts gathered, no gather).
    const std::string want =
        "the ranks' unit sequences differ: gather #0 is unit a on rank 0 but unit b on rank 1";
    DS_WORKER_EXPECT(std::string(e.what()).find(want) != std::string::npos,
                     "error '" << e.what() << "' does not contain '" << want << "'");
    std::printf("got the expected error: %s\n", e.what());
    return;
  }
  DS_WORKER_EXPECT(false, "no error for ranks running different unit orders");
}

}  // namespace
}  // namespace deepshard::testing
