// The dtype contract (src/zero/dtype_contract.h): under bf16.enabled every stage casts an fp32
// model to bf16 (parameters, frozen ones and floating buffers) and trains it; a model in another
// dtype than the config's is refused with an error naming the parameter and the keys; fp16 on the
// CPU keeps fp32 compute (libtorch 1.13 has no fp16 CPU kernels), warned.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "deepshard/comm/group.h"
#include "deepshard/models/gpt.h"
#include "deepshard/util/error.h"
#include "deepshard/zero/engine.h"

namespace deepshard::zero {
namespace dtype_contract_test {

models::GptConfig dtype_contract_tiny() {
  models::GptConfig c;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 16;
  c.block_size = 8;
  c.vocab_size = 32;
  return c;
}

config::DsConfig ds(int stage, bool bf16, bool fp16) {
  config::DsConfig c;
  c.train_micro_batch_size_per_gpu = 2;
  c.train_batch_size = 2;
  c.gradient_accumulation_steps = 1;
  c.optimizer.type = "AdamW";
  c.zero.stage = stage;
  c.bf16.enabled = bf16;
  c.fp16.enabled = fp16;
  return c;
}

std::unique_ptr<comm::Group> single() {
  return comm::Group::create(comm::RendezvousInfo{}, std::chrono::seconds(10));
}

class DtypeContract : public ::testing::TestWithParam<int> {};

TEST_P(DtypeContract, Bf16CastsAnFp32Model) {
  auto group = single();
  models::Gpt model(dtype_contract_tiny(), 3);
  // A frozen parameter and a floating buffer are cast too (module.bfloat16()).
  model->wpe->weight.set_requires_grad(false);
  model->register_buffer("scale", torch::ones({4}));
  auto engine = Engine::initialize(model.ptr(), ds(GetParam(), true, false), *group);
  engine->with_full_parameters([&] {
    for (const auto& p : model->named_parameters())
      EXPECT_EQ(p.value().scalar_type(), at::kBFloat16) << p.key();
  });
  EXPECT_EQ(model->named_buffers()["scale"].scalar_type(), at::kBFloat16);
  auto x = torch::randint(0, 32, {2, 8}, torch::kLong);
  const at::Tensor loss = model->loss(x, x);
  engine->backward(loss);
  EXPECT_TRUE(engine->step().applied);
  EXPECT_GT(engine->ledger().bytes(MemoryCategory::kMasterWeights), 0);  // an fp32 master exists
}

TEST_P(DtypeContract, RefusesALowPrecisionModelUnderAnFp32Config) {
  auto group = single();
  models::Gpt model(dtype_contract_tiny(), 3);
  model->to(torch::kBFloat16);
  try {
    Engine::initialize(model.ptr(), ds(GetParam(), false, false), *group);
    FAIL() << "a bf16 model trained under an fp32 config";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("parameter wte.weight is BFloat16 but the config has "
                                         "neither bf16.enabled nor fp16.enabled"),
              std::string::npos)
        << e.what();
  }
}

TEST_P(DtypeContract, RefusesAnFp16ModelUnderBf16) {
  auto group = single();
  models::Gpt model(dtype_contract_tiny(), 3);
  model->to(torch::kHalf);
  EXPECT_THROW(Engine::initialize(model.ptr(), ds(GetParam(), true, false), *group), ConfigError);
}

TEST_P(DtypeContract, Fp16OnCpuKeepsFp32Compute) {
  auto group = single();
  models::Gpt model(dtype_contract_tiny(), 3);
  auto engine = Engine::initialize(model.ptr(), ds(GetParam(), false, true), *group);
  for (const auto& p : model->parameters()) EXPECT_EQ(p.scalar_type(), at::kFloat);
  EXPECT_GT(engine->loss_scale(), 1.0);  // fp16's dynamic loss scaling applies
}

INSTANTIATE_TEST_SUITE_P(Stages, DtypeContract, ::testing::Values(0, 1, 2, 3));

}  // namespace dtype_contract_test
}  // namespace deepshard::zero
