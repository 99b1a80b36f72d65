// train::initialize: DeepSpeed's loop `loss = engine(input_ids, labels); engine.backward(loss);
// engine.step()` on a deepshard model. engine(...) is the model's loss (labels [B]: the
// classification head's, [B, T]: the language model's), and the loop trains: on one fixed batch
// the classification loss falls. A bare engine without a forward refuses the call.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "deepshard/comm/rendezvous.h"
#include "deepshard/models/bert.h"
#include "deepshard/train/trainer.h"
#include "deepshard/util/error.h"

namespace deepshard::train {
namespace initialize_test {

models::BertConfig tiny_classifier() {
  models::BertConfig c;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 32;
  c.intermediate_size = 64;
  c.block_size = 16;
  c.vocab_size = 64;
  c.num_labels = 3;
  return c;
}

config::DsConfig ds_config() {
  config::DsConfig c;
  c.train_micro_batch_size_per_gpu = 6;
  c.gradient_accumulation_steps = 1;
  c.train_batch_size = 6;
  c.optimizer.type = "AdamW";
  c.optimizer.lr = 2e-3;
  return c;
}

TEST(Initialize, EngineCallIsTheModelsLossAndTheLoopTrains) {
  auto group = comm::Group::create(comm::RendezvousInfo{}, std::chrono::seconds(10));
  auto model = std::make_shared<models::BertImpl>(tiny_classifier(), 5);
  auto engine = initialize(model, ds_config(), *group);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(11);
  const at::Tensor ids = torch::randint(0, 63, {6, 16}, gen, torch::kLong);
  const at::Tensor classes = torch::tensor({0, 1, 2, 0, 1, 2}, torch::kLong);
  const at::Tensor tokens = torch::randint(0, 63, {6, 16}, gen, torch::kLong);
  {
    torch::NoGradGuard no_grad;
    EXPECT_TRUE((*engine)(ids, classes).equal(model->classification_loss(ids, classes)));
    EXPECT_TRUE((*engine)(ids, tokens).equal(model->loss(ids, tokens)));
  }
  double first = 0, last = 0;
  for (int step = 0; step < 40; ++step) {
    at::Tensor loss = (*engine)(ids, classes);
    engine->backward(loss);
    engine->step();
    (step == 0 ? first : last) = loss.item<double>();
  }
  EXPECT_EQ(engine->global_steps(), 40);
  EXPECT_LT(last, 0.5 * first) << "first " << first << ", last " << last;
  EXPECT_THROW((*engine)(ids, torch::zeros({6, 16, 2}, torch::kLong)), Error);

  auto bare_model = std::make_shared<models::BertImpl>(tiny_classifier(), 5);
  auto bare = zero::Engine::initialize(bare_model, ds_config(), *group);
  try {
    (*bare)(ids, classes);
    ADD_FAILURE() << "a bare engine ran a forward";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no forward set"), std::string::npos) << e.what();
  }
}

}  // namespace initialize_test
}  // namespace deepshard::train
